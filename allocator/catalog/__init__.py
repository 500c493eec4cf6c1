"""Cloud instance type catalogs, shipped as data: InstanceType documents (the snapshot kind)
with capacity, Karpenter's labels, offerings and the devices their DRA drivers publish.

``aws``: the AWS EC2 accelerator families (``aws.json``, rebuilt by
``scripts/generate_aws_catalog.py``); ``nvidia`` and ``neuron``: the devices of NVIDIA's GPU
DRA driver and of the Neuron DRA driver; ``pairing``: which catalog instance types a cluster
snapshot needs. Pure: no network, no clock.
"""

# The catalog's default region, here so that the command line's help names it without loading
# the catalog (8 ms a process).
DEFAULT_REGION = "us-east-1"
