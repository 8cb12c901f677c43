"""mambacheck_adapter: checks Triton / PyTorch kernels of vLLM's Mamba state copies against
mambacheck's case files (model/CASE_FORMAT.md). See adapters/python/README.md."""

# The mambacheck release this package belongs to (CMakeLists.txt's project VERSION; a test
# checks `mambacheck --version` says the same).
__version__ = "0.1.0"

PROTOCOL_VERSION = 1


def one_line(text):
    """`text` (or an exception's message) on one line, as the workers' answers carry it."""
    return " ".join(str(text).split()) or "(empty message)"
