"""The words the advisor speaks, in one place: kernel verdicts and bugs (declared with the kernel facts), recommendation
kinds and severities.

The API's enums, the filters, the pages and the rules all take them from here. Pure Python.
"""

from __future__ import annotations

from typing import Literal, get_args

from apps.advisor.kernel.facts import Bug, Confidence, Verdict

Kind = Literal[
    "upgrade_kernel",
    "raise_limit",
    "use_whole_cores",
    "cut_threads",
    "add_threads",
    "lower_request",
    "set_request",
    "raise_pod_limit",
]
Severity = Literal["info", "warning", "critical"]

VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
BUGS: tuple[Bug, ...] = get_args(Bug)
CONFIDENCES: tuple[Confidence, ...] = get_args(Confidence)
RECOMMENDATION_KINDS: tuple[Kind, ...] = get_args(Kind)
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
# The kinds that answer throttling (they need periods in the window to be judged).
THROTTLING_KINDS: tuple[Kind, ...] = (
    "upgrade_kernel",
    "raise_limit",
    "use_whole_cores",
    "cut_threads",
    "raise_pod_limit",
)
# Most severe first; 9 stands for "no recommendation" where findings are sorted by severity.
SEVERITY_RANK: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}
NO_SEVERITY_RANK = 9
