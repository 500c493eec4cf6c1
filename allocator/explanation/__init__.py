"""Why a pod was refused, in words: a refused instance type's funnels built from what the DFS
recorded (``builder``), each check's words (``messages``), a failed pod's decisive cause
(``cause``) and what Karpenter's own search would have tried (``karpenter_search``). The
funnel itself is data (``allocator/funnel.py``); fixes are ``allocator/suggestions/``."""
