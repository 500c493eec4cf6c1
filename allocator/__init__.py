"""dra-web's allocator: Karpenter's DRA device allocator and provisioning simulation.

Pure Python: no Django, Celery or network imports. ``simulate`` is the one entry point the
command line and the web service share.
"""

__version__ = "0.1.0"

__all__ = ["SimulationOptions", "SimulationOutput", "simulate"]


def __getattr__(name: str):
    # Lazy: ``import allocator`` stays cheap (no CEL environment) until a simulation is run.
    if name in ("simulate", "SimulationOptions", "SimulationOutput"):
        from allocator import simulation

        return getattr(simulation, name)
    raise AttributeError(f"module 'allocator' has no attribute {name!r}")
