"""The devices the AWS Neuron DRA driver (driver ``neuron.aws.com``) publishes.

What is public (the Neuron SDK's DRA page and its example claim templates): one device per
Neuron device, ``neurondevice0``, ``neurondevice1``, ...; string attributes ``instanceType``
and ``neuronDriverVersion``; the connected-device groups
``resource.aws.com/devicegroup{1,4,8,16}_id`` that claims constrain with ``matchAttribute`` to
get 1, 4, 8 or 16 connected devices. The driver's full attribute list is not public. Group ids
here are placeholders: consecutive devices form a group, and a group size is published only up
to the instance's device count.
"""

from __future__ import annotations

GROUP_DOMAIN = "resource.aws.com"


def neuron_device(instance_type: str, index: int, facts: dict, count: int) -> dict:
    attributes: dict[str, dict] = {
        "instanceType": {"string": instance_type},
        "neuronDriverVersion": {"string": facts["neuronDriverVersion"]},
    }
    for size in facts["groups"]:
        if size <= count:
            attributes[f"{GROUP_DOMAIN}/devicegroup{size}_id"] = {"int": index // size}
    return {"name": facts["deviceName"].format(index=index), "attributes": attributes}


def neuron_templates(instance_type: str, count: int, facts: dict) -> list[dict]:
    devices = [neuron_device(instance_type, i, facts, count) for i in range(count)]
    return [{"driver": facts["driver"], "pool": {"name": instance_type}, "devices": devices}]
