#!/usr/bin/env python3
"""Peer figures for BenchmarkLaunchOverhead, run on the GPU machine.

The same driver, a different caller: a 16-element kernel like the tiny
fusion, compiled with NVRTC and launched with cuLaunchKernel through
ctypes, timed as launch_host-enqueue is (best of 50 bursts of 100 launches,
synchronised between bursts). ctypes' own cost per call is measured on a
call that does no work (cuCtxGetCurrent) and printed next to it, so
"driver" = launch - ctypes. Then PyTorch: a CUDA graph of 100 tiny kernels
replayed (per kernel), and eager torch ops (per op).

Prints one line per figure: "peer <name> <microseconds>".
"""
import ctypes
import time

cu = ctypes.CDLL("libcuda.so.1")
nvrtc = ctypes.CDLL("libnvrtc.so.13")


def check(r, what):
    if r != 0:
        raise SystemExit(f"{what} failed: {r}")


SRC = b"""
extern "C" __global__ void tiny(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}
"""


def module():
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), SRC, b"tiny.cu", 0, None, None), "nvrtcCreateProgram")
    major, minor = ctypes.c_int(), ctypes.c_int()
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    check(cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cc major")
    check(cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cc minor")
    arch = f"--gpu-architecture=sm_{major.value}{minor.value}".encode()
    opts = (ctypes.c_char_p * 1)(arch)
    check(nvrtc.nvrtcCompileProgram(prog, 1, opts), "nvrtcCompileProgram")
    size = ctypes.c_size_t()
    check(nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
    cubin = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    check(cu.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
    check(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"tiny"), "cuModuleGetFunction")
    return fn


def ctypes_launch():
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    fn = module()
    stream = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")  # non-blocking, as ours
    x, y = ctypes.c_uint64(), ctypes.c_uint64()
    check(cu.cuMemAlloc_v2(ctypes.byref(x), 64), "cuMemAlloc")
    check(cu.cuMemAlloc_v2(ctypes.byref(y), 64), "cuMemAlloc")
    n = ctypes.c_int64(16)
    params = (ctypes.c_void_p * 3)(ctypes.addressof(x), ctypes.addressof(y), ctypes.addressof(n))
    launch = cu.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    get = cu.cuCtxGetCurrent
    cur = ctypes.c_void_p()

    def burst_best(body, burst=100, bursts=50):
        best = float("inf")
        for _ in range(bursts):
            t0 = time.perf_counter_ns()
            for _ in range(burst):
                body()
            best = min(best, time.perf_counter_ns() - t0)
            check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize")
        return best / 1e3 / burst

    def one():
        launch(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, None)

    def with_ctx():
        cu.cuCtxSetCurrent(ctx)
        launch(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, None)

    for _ in range(1000):
        one()
    check(cu.cuStreamSynchronize(stream), "sync")
    print(f"peer ctypes-cuLaunchKernel {burst_best(one):.3f}")
    print(f"peer ctypes-cuCtxSetCurrent+cuLaunchKernel {burst_best(with_ctx):.3f}")
    print(f"peer ctypes-empty-call {burst_best(lambda: get(ctypes.byref(cur))):.3f}")


def torch_peers():
    import torch

    x = torch.randn(16, device="cuda")
    y = torch.empty_like(x)
    for _ in range(100):
        torch.mul(x, 2.0, out=y)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(50):
        t0 = time.perf_counter_ns()
        for _ in range(100):
            torch.mul(x, 2.0, out=y)
        best = min(best, time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
    print(f"peer torch-eager-op {best / 1e3 / 100:.3f}")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            torch.mul(x, 2.0, out=y)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    kernels = 100
    with torch.cuda.graph(g):
        for _ in range(kernels):
            torch.mul(x, 2.0, out=y)
    g.replay()
    torch.cuda.synchronize()
    reps = 200
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        g.replay()
    torch.cuda.synchronize()
    print(f"peer torch-cudagraph-per-kernel {(time.perf_counter_ns() - t0) / 1e3 / reps / kernels:.3f}")


if __name__ == "__main__":
    ctypes_launch()
    try:
        torch_peers()
    except Exception as e:  # torch missing: the ctypes figures still stand
        print(f"peer torch-unavailable {e}")
