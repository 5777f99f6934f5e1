"""What the doctor found: one finding per fact or trap, each with its fix."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """How a finding bears on chatting: ``FAIL`` means chat does not work."""

    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Finding:
    """One check's result: what it is about, what was found, and what to do."""

    key: str
    title: str
    status: Status
    detail: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Report:
    """All findings; chat works when none failed."""

    findings: tuple[Finding, ...]

    @property
    def chat_works(self) -> bool:
        return all(f.status is not Status.FAIL for f in self.findings)

    @property
    def fixes(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.fix and f.status in (Status.WARN, Status.FAIL))

    def get(self, key: str) -> Finding:
        return next(f for f in self.findings if f.key == key)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chat_works": self.chat_works,
            "findings": [{**asdict(f), "status": f.status.value} for f in self.findings],
        }

    def to_text(self) -> str:
        marks = {Status.OK: "ok  ", Status.INFO: "info", Status.WARN: "WARN", Status.FAIL: "FAIL"}
        lines = []
        for f in self.findings:
            lines.append(f"[{marks[f.status]}] {f.title}: {f.detail}")
            if f.fix and f.status in (Status.WARN, Status.FAIL):
                lines.append(f"       fix: {f.fix}")
        verdict = "chat works" if self.chat_works else "chat does NOT work"
        lines.append(f"{verdict}; {len(self.fixes)} thing(s) to fix" if self.fixes else verdict)
        return "\n".join(lines)
