"""cake's errors as Python exceptions, one per C ABI status code, each carrying the library's
message (which names the argument, the candidate or the build)."""


class CakeError(RuntimeError):
    """Any error cake reports. `status` is the C ABI's code; `details` what the call handed
    back beside it (a prebuild's summary, the plans of a job), when it did."""

    status = 5

    def __init__(self, message, details=None):
        super().__init__(message)
        self.details = details


class ArgumentError(CakeError, ValueError):
    """A bad argument: nothing was launched or written."""
    status = 1


class NoRouteError(CakeError):
    """No candidate of the op's route can serve the call; the message lists why each was passed over."""
    status = 2


class CompileError(CakeError):
    """NVRTC failed (or crashed, or timed out); the message carries its log."""
    status = 3


class DriverError(CakeError):
    """A CUDA driver call failed."""
    status = 4


_BY_STATUS = {c.status: c for c in (ArgumentError, NoRouteError, CompileError, DriverError)}


def error_for(status, message, details=None):
    return _BY_STATUS.get(status, CakeError)(message, details)
