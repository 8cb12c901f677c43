"""mambacheck_adapter: checks Triton / PyTorch kernels of vLLM's Mamba state copies against
mambacheck's case files (model/CASE_FORMAT.md). See adapters/python/README.md."""

PROTOCOL_VERSION = 1
