"""llama.cpp's libraries by each platform's file names, in llama-cpp-python's folder."""

from __future__ import annotations

import ctypes
import re
import tokenize
from pathlib import Path

import pytest

from vllmchat.core.machine.llama_libs import library_names, llama_lib_dir, llama_library

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("platform", "name", "expected"),
    [
        ("linux", "ggml", "libggml.so"),
        ("linux", "ggml-base", "libggml-base.so"),
        ("freebsd14", "llama", "libllama.so"),
        ("darwin", "ggml", "libggml.dylib"),
        ("darwin", "mtmd", "libmtmd.dylib"),
        ("win32", "ggml", "ggml.dll"),
        ("win32", "llama", "llama.dll"),
    ],
)
def test_each_platform_names_the_library_as_llama_cpp_python_loads_it(platform, name, expected):
    assert library_names(name, platform)[0] == expected
    folder = Path("/site-packages/llama_cpp/lib")
    assert llama_library(name, folder=folder, platform=platform) == folder / expected


def test_the_loaders_other_names_are_taken_where_only_they_exist(tmp_path):
    (tmp_path / "libggml.so").write_bytes(b"")  # a macOS build that named it .so
    (tmp_path / "libllama.dll").write_bytes(b"")  # a Windows build that kept the lib prefix
    assert llama_library("ggml", folder=tmp_path, platform="darwin") == tmp_path / "libggml.so"
    assert llama_library("llama", folder=tmp_path, platform="win32") == tmp_path / "libllama.dll"
    assert library_names("ggml", "darwin") == ("libggml.dylib", "libggml.so")
    assert library_names("ggml", "win32") == ("ggml.dll", "libggml.dll")


def test_the_folder_is_llama_cpp_pythons_or_the_one_its_variable_names(monkeypatch, tmp_path):
    import llama_cpp

    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    assert llama_lib_dir() == Path(llama_cpp.__file__).parent / "lib"
    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", str(tmp_path))
    assert llama_library("ggml", platform="linux") == tmp_path / "libggml.so"


def test_this_machines_ggml_loads_and_answers(monkeypatch):
    monkeypatch.delenv("LLAMA_CPP_LIB_PATH", raising=False)
    ggml = ctypes.CDLL(str(llama_library("ggml")))
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    assert ggml.ggml_backend_reg_count() >= 1  # the CPU backend at least


def test_no_library_file_name_is_written_out_in_the_code():
    """No string in the package names one platform's file of llama.cpp's libraries."""
    name = re.compile(r"lib(ggml|llama|mtmd)[\w.-]*\.(so|dylib|dll)\b")
    found = []
    for path in (ROOT / "vllmchat").rglob("*.py"):
        with path.open(encoding="utf-8") as source:
            for token in tokenize.generate_tokens(source.readline):
                if token.type == tokenize.STRING and name.search(token.string):
                    found.append(f"{path.relative_to(ROOT)}:{token.start[0]}: {token.string}")
    assert found == []
