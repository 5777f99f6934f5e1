"""``vllmchat doctor``: why something does not work here, and the one thing to do about it."""

from vllmchat.core.doctor.findings import Finding, Report, Status
from vllmchat.core.doctor.run import run_doctor

__all__ = ["Finding", "Report", "Status", "run_doctor"]
