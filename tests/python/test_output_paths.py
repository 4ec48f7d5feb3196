"""Issue 30, lost data, in the Python API: an output never replaces an input (however spelt)
and never replaces a device, a FIFO or a folder; refused before any work, input kept."""

import hashlib
import os

import numpy as np
import pytest

import mactune
from mactune import tensorfile
from conftest import TRACES

TRACE = TRACES / "text_1k.safetensors"


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def trace_copy(tmp_path):
    p = tmp_path / "t.safetensors"
    p.write_bytes(TRACE.read_bytes())
    (tmp_path / "sub").mkdir()
    return p


@pytest.mark.parametrize("form", ["same", "dot", "dotdot", "symlink", "hardlink"])
def test_calibrate_output_naming_the_trace_is_refused(trace_copy, form):
    d = trace_copy.parent
    out = {"same": trace_copy, "dot": d / "." / "t.safetensors",
           "dotdot": d / "sub" / ".." / "t.safetensors"}.get(form)
    if form == "symlink":
        out = d / "link.yaml"
        os.symlink("t.safetensors", out)
    if form == "hardlink":
        out = d / "hard.yaml"
        os.link(trace_copy, out)
    before = digest(trace_copy)
    with pytest.raises(mactune.InputError, match=r"cannot write schedule .* it is the trace"):
        mactune.calibrate([trace_copy], max_err=0.01, taus=[0.9], output=out)
    assert digest(trace_copy) == before


def test_calibrate_output_as_dev_null_or_a_folder_is_refused(trace_copy):
    for out, kind in [("/dev/null", "a character device"), (trace_copy.parent, "a directory")]:
        with pytest.raises(mactune.InputError, match=kind):
            mactune.calibrate([trace_copy], max_err=0.01, taus=[0.9], output=out)
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_calibrate_output_in_a_missing_folder_is_refused_before_work(trace_copy):
    with pytest.raises(mactune.InputError, match="does not exist"):
        mactune.calibrate([trace_copy], max_err=0.01, taus=[0.9],
                          output=trace_copy.parent / "no" / "s.yaml")


def test_schedule_yaml_output_as_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(mactune.InputError, match="a FIFO"):
        mactune.schedule_yaml({0: mactune.MacParams()}, output=fifo)


def test_tensorfile_save_refuses_a_device_and_names_a_missing_folder(tmp_path):
    a = {"x": np.ones((2, 2), np.float32)}
    with pytest.raises(ValueError, match="a character device"):
        tensorfile.save("/dev/null", a)
    with pytest.raises(ValueError, match="does not exist"):
        tensorfile.save(tmp_path / "no" / "x.safetensors", a)
    tensorfile.check_output(tmp_path / "new.safetensors", "trace", inputs=[TRACE])
    with pytest.raises(ValueError, match="it is the input"):
        tensorfile.check_output(TRACE, "trace", inputs=[TRACE])
