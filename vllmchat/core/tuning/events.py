"""The events of measuring this machine: a tuning sweep's progress and pick, and the
quant lab's progress and rows."""

from __future__ import annotations

from dataclasses import dataclass

from vllmchat.core.tuning.results import QuantRow, TunePoint, TuneResult


@dataclass(frozen=True)
class TuneStarted:
    """A sweep began: points planned, the time budget, the device measured."""

    planned: int  # points planned so far (refinement may add more)
    budget_s: float
    device: str


@dataclass(frozen=True)
class PointMeasured:
    """One configuration measured, with progress and the time left."""

    point: TunePoint
    done: int
    planned: int
    elapsed_s: float
    eta_s: float  # time left, from the mean time per point (capped by the budget)


@dataclass(frozen=True)
class TuneFinished:
    """The sweep ended (or was stopped): its points and the pick."""

    result: TuneResult


TuneEvent = TuneStarted | PointMeasured | TuneFinished


@dataclass(frozen=True)
class QuantProgress:
    """The quant lab starts on file ``done + 1`` of ``total``."""

    done: int
    total: int
    current: str


@dataclass(frozen=True)
class QuantsCompared:
    """The quant lab ended (or was stopped): a row per file measured, and the reference."""

    rows: tuple[QuantRow, ...]
    reference: str


QuantEvent = QuantProgress | QuantsCompared
