"""What a run records of the hardware that trained it (runtime.cpu_model, runtime.hardware)."""

import platform
import subprocess
import sys

import pytest
import torch

from tiedlm import runtime

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# the first two processors' blocks of /proc/cpuinfo on two hosts (abridged): the fields are the kernel's
INTEL = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 85
model name\t: Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz
stepping\t: 7
flags\t\t: fpu vme avx2 avx512f

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 106
model name\t: another CPU
"""
KVM_AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 23
model\t\t: 1
model name\t: AMD EPYC
"""


def test_cpu_model_reads_the_first_processor(tmp_path):
    (tmp_path / "intel").write_text(INTEL)
    (tmp_path / "amd").write_text(KVM_AMD)
    assert runtime.cpu_model(tmp_path / "intel") == "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz (family 6 model 85)"
    # a hypervisor's generic name: the numbers tell Zen 1 (family 23 model 1) from Zen 3 (family 25 model 1)
    assert runtime.cpu_model(tmp_path / "amd") == "AMD EPYC (family 23 model 1)"


def test_cpu_model_without_cpuinfo_falls_back_to_the_platform(tmp_path):
    (tmp_path / "arm").write_text("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n")
    expected = platform.processor() or platform.machine() or "unknown CPU"
    assert runtime.cpu_model(tmp_path / "missing") == expected
    assert runtime.cpu_model(tmp_path / "arm") == expected


def test_hardware_names_the_cpu_and_its_vector_unit():
    what = runtime.hardware(torch.device("cpu"))
    assert what.startswith(runtime.cpu_model()) and what.endswith(torch.backends.cpu.get_cpu_capability())


def test_numerics_hash_repeats_and_sees_one_ulp():
    """The same kernels on the same host give the same numerics hash in a fresh process; one kernel rounding one
    ulp differently (what another CPU model's blocking or another library build does) changes it."""
    here = runtime.numerics_hash("cpu")
    threads = torch.get_num_threads()
    code = f"import torch; torch.set_num_threads({threads}); from tiedlm import runtime as r; "
    code += "print(r.numerics_hash())"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert len(here) == 16 and here == fresh

    tanh = torch.tanh
    try:  # tanh one ulp up, towards +inf, everywhere
        torch.tanh = lambda x: torch.nextafter(tanh(x), torch.full_like(x, float("inf")))
        shifted = runtime._numerics_hash.__wrapped__("cpu", torch.get_num_threads())
    finally:
        torch.tanh = tanh
    assert shifted != runtime._numerics_hash.__wrapped__("cpu", torch.get_num_threads()) == here


def test_the_record_says_whether_the_cpp_kernels_trained(monkeypatch):
    from tiedlm import native

    assert runtime.host_record(torch.device("cpu"))["native_kernels"] is native.loaded()
    monkeypatch.setattr(native, "loaded", lambda: False)  # a host without a compiler: the Python code stood in
    record = runtime.host_record(torch.device("cpu"))
    assert record["native_kernels"] is False


@cuda
def test_a_gpu_is_recorded_by_name_with_a_numerics_hash_that_repeats():
    """On a GPU the record is the GPU's name and the numerics hash of its kernels (no C++ kernels: they are the CPU's),
    and a fresh process on the same GPU computes the same hash (cuBLAS picks the same kernels for the same
    shapes), so two runs on one GPU model can be told to repeat to the bit."""
    dev = torch.device("cuda")
    record = runtime.host_record(dev)
    assert record == {"machine": torch.cuda.get_device_name(dev), "numerics": runtime.numerics_hash(dev)}
    code = "from tiedlm import runtime as r; print(r.numerics_hash('cuda'))"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert len(fresh) == 16 and fresh == record["numerics"]
