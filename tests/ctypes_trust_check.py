"""cake_ctypes from outside the build: libcake.so loaded by a relative path still finds the
compile worker beside it; tensors it cannot describe are refused before any call (with torch).

    python3 ctypes_trust_check.py RELATIVE_LIBCAKE EXPECTED_WORKER TOOLS_DIR
"""
import os
import sys


def main():
    lib, expected, tools = sys.argv[1:4]
    sys.path.insert(0, tools)
    import cake_ctypes

    rt = cake_ctypes.CakeRuntime(lib)
    os.chdir("/")
    got = rt.compile_worker()
    if got != expected:
        print(f"FAIL: worker '{got}', expected '{expected}'")
        return 1
    print(f"worker: {got}")
    try:
        import torch
    except ImportError:
        print("torch not importable: the tensor checks are skipped")
        return 0
    for name, t, want in [("offs", torch.zeros(4, dtype=torch.int32), "offs: must be a CUDA tensor"),
                          ("x", torch.zeros(4, dtype=torch.uint8), "x: must be a CUDA tensor")]:
        try:
            cake_ctypes.dltensor(t, name)
            print(f"FAIL: {name} on {t.device} was accepted")
            return 1
        except ValueError as e:
            if want not in str(e):
                print(f"FAIL: '{e}' does not say '{want}'")
                return 1
    if torch.cuda.is_available():
        try:
            cake_ctypes.dltensor(torch.zeros(4, dtype=torch.uint8, device="cuda"), "x")
            print("FAIL: a uint8 tensor was accepted")
            return 1
        except ValueError as e:
            if "x: dtype torch.uint8 is not one cake takes" not in str(e):
                print(f"FAIL: {e}")
                return 1
        d = cake_ctypes.dltensor(torch.zeros(4, device="cuda"), "x")
        if d.device.device_id != torch.cuda.current_device():
            print("FAIL: device id")
            return 1
    print("tensor checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
