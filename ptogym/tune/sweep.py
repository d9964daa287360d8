"""The sweep: Optuna's ask/tell over one level at a time, trials on an engine.

Per level: the candidates of each ``TUNING`` parameter for the level's shape; an
Optuna study (TPE, ask/tell) - or every configuration in turn when the whole space
holds no more than ``trials`` that first evaluates the seed (the tuned table's
values, or ``TUNING.plain``) and learns from the trials the database already holds.
A configuration the constraints refuse is recorded as rejected without a process; one
measured before (same configuration, level and measurement) is told its earlier
result instead of running again.  Up to ``workers`` trials are in flight at once.

The winner is the fastest ``ok`` trial that also passes on ``verify_backend`` (pypto's
own interpreter by default: ``pypto-sim`` computing the numbers); a winner that fails
there is recorded and the next fastest is checked.  A level too large for pypto's
interpreter keeps its fastest trial with the check ``TOO_LARGE`` (every trial passed
on ptogym's interpreter already).
"""
from __future__ import annotations

import concurrent.futures
import itertools
import sys
import time
from dataclasses import dataclass, field

from ptogym.verify.cases import load_cases

from .db import Database
from .engines import open_engine
from .space import config_key, hashable, label
from .table import table_params
from .trial import TrialRequest, execute, load_level

MAX_REPEATS = 200  # configurations asked again in a row before a space counts as exhausted
WINNER_CHECKS = 3  # fastest trials checked on the verify backend before a level has no winner


@dataclass
class LevelResult:
    op: str
    level: str
    band: str
    trials: list = field(default_factory=list)  # the database rows of this level (this measurement)
    table_us: float | None = None  # the tuned table's configuration, when it was measured
    winner: dict | None = None  # the winning row
    check: dict | None = None  # its check on the verify backend
    exhausted: bool = False
    ran: int = 0  # trials this sweep ran in a process
    swept: bool = True  # False: a band mate, measured only for ``--apply``'s cross-check
    table_key: str | None = None  # the tuned table's configuration at this level
    band_mates: list = field(default_factory=list)  # unswept levels of the band, measured

    @property
    def best_us(self) -> float | None:
        return self.winner["us"] if self.winner else None

    def to_dict(self) -> dict:
        return {"op": self.op, "level": self.level, "band": self.band, "table_us": self.table_us,
                "best_us": self.best_us, "winner": self.winner, "check": self.check, "exhausted": self.exhausted,
                "ran": self.ran, "trials": self.trials,
                "band_mates": [{"level": mate.level, "table_us": mate.table_us, "trials": mate.trials}
                               for mate in self.band_mates]}


class Space:
    """One level's search space: ``TUNING`` evaluated on the level's shape."""

    def __init__(self, tuning, shape: dict, base: dict, seeds=()):
        self.tuning, self.shape, self.base = tuning, shape, base
        self.choices = {}
        for name, param in tuning.params.items():
            values = param.values(shape)
            for seed in seeds:  # a seed outside the listed candidates is still a candidate
                if name in seed and hashable(seed[name]) not in values:
                    values.append(hashable(seed[name]))
            self.choices[name] = {label(value): value for value in values}

    def normalized(self, params: dict) -> dict:
        """The tuned parameters of ``params`` that matter (the others at the table's value)."""
        full = {**self.base, **params}
        return {name: full[name] for name in self.choices if self.tuning.applies(name, full)}

    def sample(self, trial) -> dict:
        """Ask ``trial`` (define-by-run, in declaration order: ``when`` sees the earlier)."""
        params = dict(self.base)
        for name, options in self.choices.items():
            if self.tuning.applies(name, params):
                params[name] = options[trial.suggest_categorical(name, list(options))]
        return self.normalized(params)

    def distributions(self, params: dict) -> dict:
        import optuna

        return {name: optuna.distributions.CategoricalDistribution(list(self.choices[name])) for name in params}

    def labels(self, params: dict) -> dict:
        return {name: label(value) for name, value in params.items()}

    def size_at_most(self, limit: int) -> int:
        """The number of distinct configurations, counted up to ``limit + 1``."""
        seen = set()
        for values in itertools.product(*(list(options.values()) for options in self.choices.values())):
            seen.add(config_key(self.normalized(dict(zip(self.choices, values)))))
            if len(seen) > limit:
                break
        return len(seen)


class Exhaustive:
    """Every configuration of a small space once: the seeds first, then in order."""

    def __init__(self, space: Space, seeds):
        def configurations():
            for seed in seeds:
                yield space.normalized(seed)
            for values in itertools.product(*(list(options.values()) for options in space.choices.values())):
                yield space.normalized(dict(zip(space.choices, values)))

        self._configurations = configurations()
        self._seen: set = set()

    def ask(self):
        for params in self._configurations:
            if config_key(params) not in self._seen:
                self._seen.add(config_key(params))
                return None, params
        return None

    def tell(self, handle, value) -> None:
        pass


class Tpe:
    """Optuna's TPE through ask/tell: the seeds enqueued first, the database's earlier
    trials of the level added as completed (or failed) trials, pending trials lied
    about (``constant_liar``) so that parallel asks spread out."""

    def __init__(self, space: Space, seeds, earlier, *, trials: int, sampler_seed: int = 0):
        import warnings

        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # group=True
        self.optuna, self.space = optuna, space
        sampler = optuna.samplers.TPESampler(seed=sampler_seed, n_startup_trials=min(8, max(1, trials // 4)),
                                             multivariate=True, group=True, constant_liar=True)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        keys = set()
        for row in earlier:
            params = space.normalized(row["config"])
            keys.add(config_key(params))
            if all(space.labels(params)[name] in space.choices[name] for name in params):
                ok = row["status"] == "ok"
                self.study.add_trial(optuna.trial.create_trial(
                    params=space.labels(params), distributions=space.distributions(params),
                    value=row["us"] if ok else None,
                    state=optuna.trial.TrialState.COMPLETE if ok else optuna.trial.TrialState.FAIL))
        for seed in seeds:
            if config_key(space.normalized(seed)) not in keys:
                self.study.enqueue_trial(space.labels(space.normalized(seed)))

    def ask(self):
        trial = self.study.ask()
        return trial.number, self.space.sample(trial)

    def tell(self, handle, value) -> None:
        if value is None:
            self.study.tell(handle, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(handle, value)


def _progress(log, level: str, index: int, total: int, origin: str, record: dict, best: float | None,
              params: dict) -> None:
    status = record["status"]
    if status == "ok":
        what = f"ok {record['us']:9.2f} us"
    else:
        what = f"{status:<8} {(record.get('reason') or '')[:90]}"
    details = []
    if record.get("compile_s") is not None:
        details.append(f"compile {record['compile_s']:.1f} s" + (" (cached)" if record.get("cache") == "hit" else ""))
    if record.get("peak_rss_bytes"):
        details.append(f"{record['peak_rss_bytes'] / 2**30:.2f} GB")
    best_text = f"best {best:.2f} us" if best is not None else "no result yet"
    print(f"[tune] {level} {index}/{total} {origin:<6} {what}  ({best_text}; {', '.join(details) or '-'})  "
          f"{label(params)}", file=log, flush=True)


def tune_level(op: str, level: str, *, trials: int, workers: int, engine, db: Database, measure: str,
               seed: str = "table", timeout_s: float = 600.0, memory_bytes: int = 4 << 30,
               verify_backend: str = "pypto-sim", sampler_seed: int = 0, log=sys.stderr) -> LevelResult:
    spec, case, kernel, tuning = load_level(op, level)
    shape = spec.extra["tuning_shape"](case)
    bands = tuning.band(**shape)
    base = table_params(kernel, shape)
    seeds = [base] if seed == "table" else [{**base, **hashable(dict(tuning.plain))}]
    space = Space(tuning, shape, base, seeds)
    result = LevelResult(spec.name, level, bands[-1])
    done = {row["config_key"]: row for row in db.trials(spec.name, level, measure)}
    exhaustive = space.size_at_most(trials) <= trials
    searcher = (Exhaustive(space, seeds) if exhaustive else
                Tpe(space, seeds, done.values(), trials=trials, sampler_seed=sampler_seed))
    seed_keys = {config_key(space.normalized(seed_params)) for seed_params in seeds}
    previous = len(db.trials(spec.name, level, measure))
    remaining = 0 if any(map(refused_by_measure, done.values())) else max(0, trials - previous)
    print(f"[tune] {spec.name} {level} (band {bands[-1]}): {'exhaustive' if exhaustive else 'TPE'} search, "
          f"{previous} trials in {db.path}, {remaining} to run on {engine.name} x{workers}", file=log, flush=True)
    in_flight: dict = {}
    started = repeats = 0
    recorded = itertools.count(previous + 1)

    def best() -> float | None:
        return min((row["us"] for row in done.values() if row["status"] == "ok"), default=None)

    def record(trial_number, params, key, origin, outcome):
        db.add_trial(op=spec.name, level=level, band=bands[-1], measure=measure, config=params, config_key=key,
                     origin=origin, record=outcome, engine=engine.name)
        done[key] = {**outcome, "config": params, "config_key": key, "origin": origin}
        searcher.tell(trial_number, outcome["us"] if outcome["status"] == "ok" else None)
        _progress(log, level, next(recorded), trials, origin, outcome, best(), params)

    try:
        while started < remaining or in_flight:
            while started < remaining and len(in_flight) < workers and repeats < MAX_REPEATS:
                proposal = searcher.ask()
                if proposal is None:  # every configuration was tried
                    repeats = MAX_REPEATS
                    break
                handle, params = proposal
                key = config_key(params)
                if key in done or key in {entry[1] for entry in in_flight.values()}:
                    repeats += 1  # told the earlier result; not a new trial
                    earlier = done.get(key)
                    searcher.tell(handle, earlier["us"] if earlier and earlier["status"] == "ok" else None)
                    continue
                repeats = 0
                started += 1
                origin = ("table" if seed == "table" else "plain") if key in seed_keys else "search"
                problems = tuning.violations({**base, **params}, shape)
                if problems:
                    record(handle, params, key, origin, {"status": "rejected",
                                                               "reason": "constraint: " + "; ".join(problems)})
                    continue
                request = TrialRequest(op, level, params, measure, timeout_s=timeout_s, memory_bytes=memory_bytes,
                                       sys_path=tuple(sys.path))
                in_flight[engine.submit(request)] = (handle, key, params, origin)
            if repeats >= MAX_REPEATS and not in_flight:
                result.exhausted = True
                break
            if not in_flight:
                continue
            finished, _ = concurrent.futures.wait(in_flight, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                number, key, params, origin = in_flight.pop(future)
                try:
                    outcome = future.result()
                except Exception as error:  # the engine itself failed (a Ray task lost with its node)
                    outcome = {"status": "failed", "reason": f"engine: {type(error).__name__}: {error}"}
                result.ran += 1
                record(number, params, key, origin, outcome)
                if refused_by_measure(outcome):
                    remaining = started  # no configuration of this level can run on this measure
    finally:
        for future in in_flight:
            future.cancel()
    result.trials = db.trials(spec.name, level, measure)
    result.table_key = table_key = config_key(space.normalized(base))
    result.table_us = next((row["us"] for row in result.trials if row["config_key"] == table_key
                            and row["status"] == "ok"), None)
    _choose_winner(result, op, level, measure, db, verify_backend, timeout_s, memory_bytes, log)
    return result


def refused_by_measure(row: dict) -> bool:
    """A trial the operator refused before anything ran: its level cannot be measured
    this way (linear's mxfp8 on pypto-sim), whatever the configuration."""
    return row["status"] == "failed" and (row.get("reason") or "").startswith("NotImplementedError:")


#: check verdicts that say only that the check ran out of room or time: run it again
UNSETTLED_CHECKS = ("MEMORY", "TIMEOUT", "INTERRUPTED")


def earlier_check(checks: list, key: str, backend: str) -> dict | None:
    """The latest settled check of configuration ``key`` on ``backend`` in ``checks``
    (a check stopped by the memory cap or the timeout is run again: the next sweep may
    give it more)."""
    settled = [check for check in checks if check["config_key"] == key and check["backend"] == backend
               and check["verdict"] not in UNSETTLED_CHECKS]
    return settled[-1] if settled else None


def _choose_winner(result: LevelResult, op, level, measure, db, verify_backend, timeout_s, memory_bytes, log):
    """The fastest ok trials in turn, until one passes on ``verify_backend``."""
    ranked = sorted((row for row in result.trials if row["status"] == "ok"), key=lambda row: row["us"])
    unique = list({row["config_key"]: row for row in reversed(ranked)}.values())[::-1]
    for row in unique[:WINNER_CHECKS]:
        check = earlier_check(db.checks(result.op, level), row["config_key"], verify_backend)
        if check is None:
            outcome = execute(TrialRequest(op, level, row["config"], measure, kind="verify",
                                           verify_backend=verify_backend, timeout_s=timeout_s,
                                           memory_bytes=memory_bytes, sys_path=tuple(sys.path)))
            verdict = outcome.get("verdict") or outcome["status"].upper()
            db.add_check(op=result.op, level=level, measure=measure, config_key=row["config_key"],
                         backend=verify_backend, verdict=verdict, reason=outcome.get("reason"))
            check = {"backend": verify_backend, "verdict": verdict, "reason": outcome.get("reason")}
        print(f"[tune] {level} winner candidate {row['us']:.2f} us on {verify_backend}: {check['verdict']}"
              + (f" ({check['reason'][:160]})" if check.get("reason") else ""), file=log, flush=True)
        if check["verdict"] in ("PASS", "TOO_LARGE"):
            result.winner, result.check = row, dict(check)
            return
    result.check = None


#: which levels ``--apply`` measures a winner at before it goes into a band: the swept
#: levels of the band only, also the case file's other CI levels in it, or every level
#: in it (the ``slow`` model shapes too)
BAND_CHECKS = ("swept", "ci", "all")


def band_mates(op: str, results: list, scope: str) -> list:
    """The case file's levels, not swept, that read a band a swept level's winner would
    go into (``scope``: ``BAND_CHECKS``), each as a LevelResult without a search."""
    if scope == "swept":
        return []
    swept = {result.level for result in results}
    bands = {result.band for result in results if result.winner}
    spec = load_level(op, results[0].level)[0] if results else None
    mates = []
    for case in load_cases(spec.cases_path, spec) if spec else ():
        if case.id in swept or (scope == "ci" and case.is_slow):
            continue
        _, _, _, tuning = load_level(op, case.id)
        band = tuning.band(**spec.extra["tuning_shape"](case))[-1]
        if band in bands:
            mates.append(LevelResult(spec.name, case.id, band, swept=False))
    return mates


def cross_check_bands(op: str, results: list, *, db: Database, measure: str, timeout_s: float, memory_bytes: int,
                      scope: str = "ci", log=sys.stderr) -> list:
    """Levels that share a band share its table entry: measure each swept level's
    winner at the band's other levels (the swept ones, and ``band_mates`` of
    ``scope`` with their table configuration too; one trial each, recorded with origin
    ``band``), so that ``--apply`` can refuse a winner that slows one of them.
    Returns the band mates measured."""
    mates = band_mates(op, results, scope)

    def measure_at(other, params: dict, key: str) -> None:
        if any(row["config_key"] == key for row in other.trials):
            return
        spec, case, kernel, tuning = load_level(op, other.level)
        shape = spec.extra["tuning_shape"](case)
        problems = tuning.violations({**table_params(kernel, shape), **params}, shape)
        outcome = ({"status": "rejected", "reason": "constraint: " + "; ".join(problems)} if problems else
                   execute(TrialRequest(op, other.level, params, measure, timeout_s=timeout_s,
                                        memory_bytes=memory_bytes, sys_path=tuple(sys.path))))
        db.add_trial(op=other.op, level=other.level, band=other.band, measure=measure, config=params,
                     config_key=key, origin="band", record=outcome, engine="local")
        other.ran += 1
        print(f"[tune] {other.level} (band {other.band}) with {'its table' if other.table_key == key else 'a winner'}"
              f": {outcome['status']}" + (f" {outcome['us']:.2f} us" if outcome["status"] == "ok"
                                           else f" ({outcome.get('reason')})"), file=log, flush=True)
        other.trials = db.trials(other.op, other.level, measure)

    for mate in mates:
        spec, case, kernel, tuning = load_level(op, mate.level)
        shape = spec.extra["tuning_shape"](case)
        base = table_params(kernel, shape)
        table = Space(tuning, shape, base, [base]).normalized(base)
        mate.table_key = config_key(table)
        mate.trials = db.trials(mate.op, mate.level, measure)
        measure_at(mate, table, mate.table_key)
        mate.table_us = next((row["us"] for row in mate.trials if row["config_key"] == mate.table_key
                              and row["status"] == "ok"), None)
    by_band: dict = {}
    for result in [*results, *mates]:
        by_band.setdefault(result.band, []).append(result)
    for members in by_band.values():
        if len(members) < 2:
            continue
        for winner in (result.winner for result in members if result.winner):
            for other in members:
                measure_at(other, winner["config"], winner["config_key"])
    for result in results:
        result.band_mates = [mate for mate in mates if mate.band == result.band]
    return mates


def band_verdict(result, results) -> str | None:
    """Why ``result``'s winner may not go into its band: a level of ``results`` in the
    same band that it slows, or where it was not measured ok; None when it may."""
    for other in [*results, *result.band_mates]:
        if other is result or other.band != result.band:
            continue
        row = next((row for row in other.trials if row["config_key"] == result.winner["config_key"]), None)
        if row is None or row["status"] != "ok":
            return f"{other.level} shares the band and the winner was not measured ok there " \
                   f"({row['status'] if row else 'no trial'})"
        reference = other.table_us if other.table_us is not None else None
        if reference is not None and row["us"] > reference:
            return f"it slows {other.level}, which shares the band ({row['us']:.2f} us against the table's " \
                   f"{reference:.2f} us)"
    return None


def trials_to_target(rows: list, target_us: float, within: float = 0.03) -> int | None:
    """The trial (1-based, in database order) that first came within ``within`` of
    ``target_us``; None if none did."""
    for index, row in enumerate(rows, 1):
        if row["status"] == "ok" and row["us"] <= target_us * (1 + within):
            return index
    return None


def run_sweep(op: str, levels: list, *, trials: int = 40, workers: int = 1, engine: str = "local",
              address: str | None = None, db_path="ptogym-tune.sqlite", measure: str = "pypto-sim",
              seed: str = "table", timeout_s: float = 600.0, memory_bytes: int = 4 << 30,
              verify_backend: str = "pypto-sim", band_check: str = "ci", log=sys.stderr) -> list[LevelResult]:
    """``ptogym tune``'s work, as a function (engines opened and closed here)."""
    db = Database(db_path)
    runner = open_engine(engine, workers, memory_bytes, address)
    start = time.perf_counter()
    try:
        results = [tune_level(op, level, trials=trials, workers=workers, engine=runner, db=db, measure=measure,
                              seed=seed, timeout_s=timeout_s, memory_bytes=memory_bytes,
                              verify_backend=verify_backend, log=log) for level in levels]
    except BaseException:  # Ctrl-C, SIGTERM: the trials in flight stop now, not at their timeout
        runner.close(interrupted=True)
        raise
    mates = cross_check_bands(op, results, db=db, measure=measure, timeout_s=timeout_s, memory_bytes=memory_bytes,
                              scope=band_check, log=log)
    runner.close()
    elapsed = time.perf_counter() - start
    ran = sum(result.ran for result in [*results, *mates])
    print(f"[tune] {len(results)} level(s), {ran} trial processes in {elapsed:.1f} s "
          f"({3600 * ran / elapsed:.0f} trials an hour, winner checks included in the time)", file=log, flush=True)
    return results
