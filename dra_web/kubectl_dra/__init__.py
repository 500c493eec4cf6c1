"""``kubectl dra``: a kubectl plugin (the console script ``kubectl-dra``) that asks the
simulator about the current context's cluster.

``kubectl dra why [-n NAMESPACE] POD``: reads the cluster as the live import does, adds the
AWS catalog when Karpenter's NodePools exist, runs one simulation and says, for that pod,
whether and where it would be placed, the decisive cause when not, who holds the devices it
needs, the verified fixes and what Karpenter would launch. ``--open URL`` also uploads the
snapshot to a dra-web server, starts a run there and prints the link to the pod on it.

Modules: ``kubeconfig`` (finding and merging the user's kubeconfig), ``why`` (the answer from
a result document, pure), ``server`` (the dra-web REST client for ``--open``), ``cli`` (the
command line and its exit codes).
"""
