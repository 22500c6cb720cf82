"""cake_ctypes.prebuild_for where a Python user reaches it: a malformed shapes text and a job
with no route raise CakeError naming why (with the summary), and a job NVRTC can build is
compiled once, then found in memory.

    python3 ctypes_prebuild_check.py LIBCAKE TOOLS_DIR
"""
import sys
import tempfile


def expect_error(fn, want):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is checked below
        if type(e).__name__ != "CakeError" or want not in str(e):
            raise AssertionError(f"expected CakeError with '{want}', got {type(e).__name__}: {e}")
        return e
    raise AssertionError(f"no error; expected '{want}'")


def main():
    lib, tools = sys.argv[1:3]
    sys.path.insert(0, tools)
    import cake_ctypes

    job = {"arch": "sm_90a", "sms": 132,
           "problems": [{"op": "elementwise.add", "dims": {"n": 4096}, "dtypes": {"out": "f32"}}]}
    offline = cake_ctypes.CakeRuntime(lib, cache_dir="", aot_dir="", jit=False)
    expect_error(lambda: offline.prebuild_for('{"problems": [{"op": "nope.fwd"}]}'), "argument 'shapes_json'")
    e = expect_error(lambda: offline.prebuild_for(job), "no route")
    assert e.summary["built"] == 0 and len(e.summary["skipped"]) == 1, e.summary

    rt = cake_ctypes.CakeRuntime(lib, cache_dir=tempfile.mkdtemp(prefix="cake-prebuild-"), aot_dir="")
    first = rt.prebuild_for(job)
    assert first["built"] == 1 and not first["failed"], first
    again = rt.prebuild_for(job)
    assert again["built"] == 0 and again["up_to_date"] == 1, again
    print("prebuild_for:", first, again)
    return 0


if __name__ == "__main__":
    sys.exit(main())
