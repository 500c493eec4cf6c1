"""dra-web's allocator: Karpenter's DRA device allocator and provisioning simulation.

Pure Python: no Django, Celery or network imports. ``simulate`` is the one entry point the
command line and the web service share.
"""

__version__ = "0.1.0"
