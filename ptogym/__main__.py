import sys

from ptogym.cli import main

sys.exit(main())
