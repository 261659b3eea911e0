"""What a row of compare's paired differences says beside its numbers (compare.compare_metric): where its 95% CI and
its test disagree about 0 (:func:`ci_against_test`), and why a correlation's difference has no interval under the
10-answer rule (:func:`few_off`: metrics.interval_read, the rule of a run's own CI, one rule). Pure."""

from __future__ import annotations

import math

from abricot_local import metrics


def ci_against_test(ci: tuple[float, float], p: float, test: str, how: str) -> str:
    """A word where a row's 95% CI and its test (unadjusted, at 5%) disagree about 0, else "": the two are different
    approximations (the verdict reads the test, Holm-adjusted; the Holm case is said on the verdict's line too)."""
    if math.isnan(ci[0]) or math.isnan(p):
        return ""
    inside = ci[0] <= 0 <= ci[1]
    if not inside and p >= 0.05:
        return (f"the 95% CI excludes 0 but {test} does not reject at 5% (p = {p:.3g}, not adjusted): the interval "
                f"({how}) and the test are different approximations, and the verdict reads the test")
    if inside and p < 0.05:
        return (f"{test} rejects at 5% (p = {p:.3g}, not adjusted) but the 95% CI includes 0: the interval ({how}) "
                f"and the test are different approximations, and the verdict reads the test (Holm-adjusted)")
    return ""


def few_off(ia, ib) -> str:
    """Why the difference of two runs' correlation (their MetricInputs over the same items, the gold alike) has no
    interval: a vector with fewer than metrics.MIN_CORRELATION_ITEMS items off its most common value (the rule a
    run's own CI follows, metrics.interval_read: a near-constant side's r is made by a handful of items, which
    neither the bootstrap nor normal theory describes), in words; "" when its interval is read (an accuracy's: always)."""
    if metrics.interval_read(ia.stat, ia.x, ia.y, ib.x, ib.y):
        return ""
    few = [f"{side} {off}" for side, v in (("a's side", ia.x), ("b's", ib.x), ("the gold's", ia.y))
           if (off := metrics.off_mode(v)) < metrics.MIN_CORRELATION_ITEMS]
    return (f"no interval: read from {metrics.MIN_CORRELATION_ITEMS} items off each side's most common value, as a "
            f"run's own CI (here, of {len(ia.x)}: {', '.join(few)} off)")
