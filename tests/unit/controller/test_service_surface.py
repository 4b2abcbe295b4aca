"""The controller's service surface: the Controller, its Ray actor and the client's
ControllerClient have exactly ControllerService's methods, with its signatures (names,
kinds, defaults and annotations of the parameters, and the return annotation); each call
the Controller delegates is implemented by exactly one of its services, with the same
signature; and an invoker calls only the surface."""

from __future__ import annotations

import inspect

import pytest
import ray

from pravega_ray.client.controller_connection import ControllerClient
from pravega_ray.contracts.controller_service import SERVICE_METHODS, ControllerService, method_name
from pravega_ray.controller.controller import Controller
from pravega_ray.controller.reader_group_tasks import ReaderGroupTasks
from pravega_ray.controller.state_synchronizer_tasks import StateSynchronizerTasks
from pravega_ray.controller.stream_cut_tasks import StreamCutTasks
from pravega_ray.controller.stream_metadata_tasks import StreamMetadataTasks
from pravega_ray.controller.stream_transaction_metadata_tasks import (
    StreamTransactionMetadataTasks,
)
from pravega_ray.controller.subscriber_tasks import SubscriberTasks
from pravega_ray.controller.table_metadata_tasks import TableMetadataTasks
from pravega_ray.controller.watermark_tasks import WatermarkTasks
from pravega_ray.invariant import InvariantViolation
from pravega_ray_actors.controller_actor import ControllerActor  # imports ray; does not start it
from tests.surfaces import public_methods, signature_shape

pytestmark = pytest.mark.timeout(30)

# What every run sees once an actor test ran: Ray has rewritten the actor's methods (without
# starting Ray). Done here too, so the result does not depend on the order of the tests.
ray.remote(ControllerActor)

IMPLEMENTATIONS = [Controller, ControllerActor, ControllerClient]
SERVICES = [
    StreamMetadataTasks,
    StreamTransactionMetadataTasks,
    TableMetadataTasks,
    ReaderGroupTasks,
    StreamCutTasks,
    SubscriberTasks,
    StateSynchronizerTasks,
    WatermarkTasks,
]
CONTROLLER_OWN = {"get_cluster_config", "damaged_records"}


def test_the_surface_is_what_clients_call() -> None:
    # + issue 12: head/tail cuts, 4 subscriber calls, reader-group positions (checkpoints)
    # + commit_transaction_and_wait; + get_epoch (issue 25: the REST API's scaling events)
    # + delete_scope_recursive (issue 26: the recursive delete as one controller workflow)
    # + list_completed_transactions (issue 27: Pravega's listCompletedTransactions)
    # + create/list/delete_state_synchronizer (issue 27: the public state synchronizer)
    # + note_writer_mark, writer_closed, remove_writer, list_writers (issue 27: watermarks)
    assert len(SERVICE_METHODS) == 38 + 2 + 4 + 1 + 1 + 1 + 1 + 1 + 3 + 4
    assert {"get_current_segments", "get_successors", "damaged_records"} <= set(SERVICE_METHODS)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(SERVICE_METHODS))
def test_each_implementation_has_the_protocol_signature(implementation: type, name: str) -> None:
    method = next((vars(c)[name] for c in implementation.__mro__ if name in vars(c)), None)
    assert inspect.isfunction(method), f"{implementation.__name__} lacks {name}"
    assert signature_shape(method) == signature_shape(SERVICE_METHODS[name])


@pytest.mark.parametrize("name", sorted(SERVICE_METHODS))
def test_each_call_is_implemented_by_one_service_with_the_protocol_signature(name: str) -> None:
    owners = [service for service in SERVICES if name in vars(service)]
    if name in CONTROLLER_OWN:
        assert owners == []
        return
    assert len(owners) == 1, f"{name} is implemented by {owners}"
    assert signature_shape(vars(owners[0])[name]) == signature_shape(SERVICE_METHODS[name])


def test_the_services_have_no_public_methods_beyond_the_surface() -> None:
    for service in SERVICES:
        assert public_methods(service) <= set(SERVICE_METHODS), service.__name__


def test_the_actor_and_the_client_have_no_otherpublic_methods() -> None:
    assert public_methods(ControllerActor) == set(SERVICE_METHODS) | {"describe"}
    assert public_methods(ControllerClient) == set(SERVICE_METHODS)
    assert set(SERVICE_METHODS) <= public_methods(Controller)


def test_method_name_accepts_only_the_protocols_own_functions() -> None:
    assert method_name(ControllerService.create_scope) == "create_scope"
    for other in (Controller.create_scope, ControllerClient.list_scopes, lambda: None, print):
        with pytest.raises(InvariantViolation):
            method_name(other)
