"""One source for settings: composed app settings, generated options, migrated files."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields

import pytest

from vllmchat.cli import build_parser
from vllmchat.cli.options import add_options, build, given
from vllmchat.core.app_settings import (
    LOAD_FIELDS,
    AppSettings,
    load_app_settings,
    save_app_settings,
)
from vllmchat.core.conversations.memory.policy import ContextPolicy
from vllmchat.core.models.memory import FitSettings
from vllmchat.core.placement import PLACEMENT_FIELDS, Placement
from vllmchat.core.settings import LoadSettings, SamplingSettings

V1_FILE = {  # a settings.json written by version 0.1 (one flat object)
    "model_path": "/models/a.gguf",
    "n_gpu_layers": 12,
    "n_ctx": 8192,
    "n_threads": 3,
    "type_k": "q8_0",
    "type_v": "f16",
    "flash_attn": True,
    "temperature": 0.2,
    "top_p": 0.9,
    "top_k": 20,
    "min_p": 0.1,
    "repeat_penalty": 1.05,
    "max_tokens": 256,
    "seed": 5,
    "system_prompt": "Be brief.",
    "presets": {"Mine": "x"},
    "policy": "keep_last",
    "summarize_threshold": 0.6,
    "summarize_every": 4,
    "keep_last_turns": 2,
    "model_folders": ["/models"],
    "retired_setting": 1,
}

V2_FILE = {  # a settings.json written before the placement was nested (version 2)
    "version": 2,
    "load": {
        "model_path": "/models/moe.gguf",
        "n_gpu_layers": 49,
        "n_cpu_moe": 20,
        "override_tensors": "",
        "tensor_split": "1,0",
        "n_ctx": 8192,
        "n_threads": 4,
        "n_threads_batch": 0,
        "n_batch": 512,
        "n_ubatch": 512,
        "flash_attn": True,
        "type_k": "q8_0",
        "type_v": "q8_0",
        "use_mmap": True,
        "draft_model": "",
        "draft_n_gpu_layers": 0,
        "mmproj_path": "",
        "swa_full": False,
    },
    "sampler": {"temperature": 0.3, "top_k": 20},
    "history": {"mode": "ask"},
    "system_prompt": "Be brief.",
    "gpu_margin_mib": 512,
}


def test_app_settings_are_the_load_sampling_and_policy_settings_composed():
    s = AppSettings.of(model_path="m.gguf", n_ctx=2048, temperature=0.0, mode="ask")
    assert isinstance(s.load, LoadSettings) and s.load.n_ctx == 2048
    assert isinstance(s.sampler, SamplingSettings) and s.sampler.temperature == 0.0
    assert isinstance(s.history, ContextPolicy) and s.history.mode == "ask"
    for wrong in ("n_cxt", "policy"):  # a typo, an old alias
        with pytest.raises(TypeError, match="unknown setting"):
            s.with_changes(**{wrong: 1})
    for flat in ("n_ctx", "temperature", "mode", "policy"):  # one way to read: where it lives
        assert not hasattr(s, flat)
    assert s.with_changes(top_k=3).changes_from(s) == {"top_k": 3}


def test_which_changes_need_a_reload_is_derived_from_where_the_field_lives():
    s = AppSettings.of(model_path="m.gguf")
    assert set(LOAD_FIELDS) == set(s.load.flat()) and "placement" not in LOAD_FIELDS
    for name in LOAD_FIELDS:
        current = s.flat()[name]
        if isinstance(current, bool):
            changes = {name: not current}
        elif isinstance(current, int):
            changes = {name: current + 16}
        else:
            changes = {name: "other.gguf"}
        if name in ("type_k", "type_v"):
            changes = {name: "q8_0", "flash_attn": True}
        if name == "tensor_split":
            changes = {name: "1,0"}
        if name == "override_tensors":
            changes = {name: r"blk\.0\.ffn_up_exps=CPU"}
        assert s.with_changes(**changes).needs_reload(s), name
    for name in ("temperature", "max_tokens", "mode", "system_prompt", "keep_last_turns"):
        value = {"mode": "ask", "system_prompt": "Hi"}.get(name, 3)
        assert not s.with_changes(**{name: value}).needs_reload(s), name


def test_one_default_each():
    s, load = AppSettings(), LoadSettings(model_path="")
    assert (s.load.n_ctx, FitSettings().n_ctx) == (load.n_ctx, load.n_ctx)
    assert FitSettings().n_ubatch == load.n_ubatch and FitSettings.of(load) == FitSettings()


def test_a_version_1_file_migrates(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(V1_FILE))
    s = load_app_settings(path)
    load, sampler = s.load, s.sampler
    place = load.placement.n_gpu_layers
    assert (load.model_path, place, load.n_ctx, load.type_k, load.flash_attn) == (
        "/models/a.gguf",
        12,
        8192,
        "q8_0",
        True,
    )
    assert (sampler.temperature, sampler.top_k, sampler.seed, sampler.max_tokens) == (
        0.2,
        20,
        5,
        256,
    )
    assert (s.history.mode, s.history.threshold, s.history.every_k_turns) == ("keep_last", 0.6, 4)
    assert s.system_prompt == "Be brief." and s.presets == {"Mine": "x"}
    save_app_settings(s, path)
    saved = json.loads(path.read_text())
    assert saved["version"] == 3 and saved["load"]["n_ctx"] == 8192
    assert saved["load"]["placement"]["n_gpu_layers"] == 12 and "n_gpu_layers" not in saved["load"]
    assert load_app_settings(path) == s  # the new file reads back the same


def test_a_version_2_file_with_the_placement_flat_migrates(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(V2_FILE))
    s = load_app_settings(path)
    assert s.load.placement == Placement(n_gpu_layers=49, n_cpu_moe=20, tensor_split="1,0")
    assert (s.load.model_path, s.load.n_ctx, s.load.type_v, s.load.flash_attn) == (
        "/models/moe.gguf",
        8192,
        "q8_0",
        True,
    )
    assert (s.sampler.temperature, s.history.mode, s.gpu_margin_mib) == (0.3, "ask", 512)
    save_app_settings(s, path)
    saved = json.loads(path.read_text())
    assert saved["version"] == 3
    assert saved["load"]["placement"] == {
        "n_gpu_layers": 49,
        "n_cpu_moe": 20,
        "override_tensors": "",
        "tensor_split": "1,0",
    }
    assert not set(PLACEMENT_FIELDS) & set(saved["load"])  # nested, not flat beside it
    assert load_app_settings(path) == s


def test_a_bad_placement_in_a_file_falls_back_and_keeps_the_rest(tmp_path):
    path = tmp_path / "settings.json"
    bad = {**V2_FILE, "load": {**V2_FILE["load"], "tensor_split": "a,b"}}
    path.write_text(json.dumps(bad))
    s = load_app_settings(path)
    assert s.load.model_path == "/models/moe.gguf" and s.sampler.temperature == 0.3
    assert s.load.placement == Placement()


def test_bad_values_fall_back_to_their_defaults_and_keep_the_rest(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                **V1_FILE,
                "n_ctx": "big",
                "temperature": True,
                "top_k": 7,
                "type_v": "q4_0",
                "flash_attn": False,
            }
        )
    )
    s = load_app_settings(path)
    assert s.load.n_ctx == AppSettings().load.n_ctx
    assert s.sampler.temperature == AppSettings().sampler.temperature
    assert s.sampler.top_k == 7 and s.system_prompt == "Be brief."  # the rest is kept
    path.write_text("{not json")
    assert load_app_settings(path) == AppSettings()


def _flat_names(cls: type) -> list[str]:
    """A dataclass's field names, a nested placement's fields in its place."""
    out: list[str] = []
    for f in fields(cls):
        out += list(PLACEMENT_FIELDS) if f.name == "placement" else [f.name]
    return out


@pytest.mark.parametrize("cls", [LoadSettings, SamplingSettings, ContextPolicy, FitSettings])
def test_options_are_generated_from_the_settings_fields(cls):
    parser = argparse.ArgumentParser()
    names = add_options(parser, cls)
    assert names == _flat_names(cls)
    assert given(parser.parse_args([]), names) == {}  # nothing given: the defaults stay
    help_text = parser.format_help()
    for name in names:
        assert f"--{name.replace('_', '-')}" in help_text
    assert "--placement" not in help_text


def test_placement_options_keep_their_flags_and_nest_again():
    parser = argparse.ArgumentParser()
    names = add_options(parser, LoadSettings)
    args = parser.parse_args(["--model", "m.gguf", "--n-gpu-layers", "7", "--n-cpu-moe", "2"])
    load = build(LoadSettings, given(args, names))
    assert load.placement == Placement(n_gpu_layers=7, n_cpu_moe=2) and load.model_path == "m.gguf"
    fit = build(FitSettings, {"n_ctx": 2048, "tensor_split": "1,0"})
    assert fit.placement == Placement(tensor_split="1,0") and fit.n_ctx == 2048


def test_chat_options_build_the_app_settings():
    from vllmchat.cli.chat import _app_settings

    args = build_parser().parse_args(
        [
            "chat",
            "--model",
            "m.gguf",
            "--n-ctx",
            "2048",
            "--no-use-mmap",
            "--flash-attn",
            "--type-v",
            "q8_0",
            "--temperature",
            "0",
            "--policy",
            "ask",
            "--threads",
            "3",
            "--system",
            "Be brief.",
        ]
    )
    s = _app_settings(args)
    load = s.load
    assert (load.model_path, load.n_ctx, load.use_mmap, load.flash_attn, load.type_v) == (
        "m.gguf",
        2048,
        False,
        True,
        "q8_0",
    )
    assert (s.sampler.temperature, s.history.mode, load.n_threads, s.system_prompt) == (
        0.0,
        "ask",
        3,
        "Be brief.",
    )
    assert s.sampler.top_k == AppSettings().sampler.top_k  # not given: the one default


def test_placement_settings_are_checked():
    assert Placement(tensor_split="3, 2").split == (3.0, 2.0)
    load = LoadSettings(model_path="m").with_changes(tensor_split="3, 2")
    assert load.placement.split == (3.0, 2.0)
    for bad in ({"n_cpu_moe": -1}, {"tensor_split": "a,b"}, {"tensor_split": "0,0"}):
        with pytest.raises(ValueError):
            Placement(**bad)
        with pytest.raises(ValueError):
            AppSettings.of(model_path="m", **bad)
