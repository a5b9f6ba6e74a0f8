"""The `bench` harness: experiments, the MAPE loop, backends, run records and analysis."""

__version__ = "0.1.0"
