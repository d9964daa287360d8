"""RMSNorm (AT-03): y = x / sqrt(mean(x^2) + eps) * gamma (+ bias), rsqrt or sqrt+div, fp32 inside."""
