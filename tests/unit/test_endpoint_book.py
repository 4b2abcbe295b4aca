"""getURI's answers while a container does not answer (``pravega_ray.endpoints.EndpointBook``).

Found by a 10-minute chaos run: a container down for 65 s made getURI fail for longer than
the official Rust client retries it (10 tries, about a minute); its segment reader then
panicked and the official reader group never read that segment again. A failed connection
it retries for ever, so getURI now answers the endpoint the container named last."""

from __future__ import annotations

import threading

import pytest

from pravega_ray.endpoints import EndpointBook, EndpointConfig
from pravega_ray.errors import ContainerNotReadyError


class Container:
    """A container's answer to "where is your gateway?", down or up on demand."""

    def __init__(self, endpoint: tuple[str, int]) -> None:
        self.endpoint = endpoint
        self.up = True
        self.timeouts: list[float | None] = []

    def ask(self, timeout_s: float | None) -> tuple[str, int]:
        self.timeouts.append(timeout_s)
        if not self.up:
            raise ContainerNotReadyError("restarting")
        return self.endpoint


def test_a_container_never_heard_of_gets_the_error_and_waits_its_own_timeout() -> None:
    book = EndpointBook()
    container = Container(("h", 1))
    container.up = False
    with pytest.raises(ContainerNotReadyError):
        book.answer(0, container.ask)
    assert container.timeouts == [None]


def test_a_container_down_is_answered_with_the_endpoint_it_named_last_at_once() -> None:
    book = EndpointBook(quick_s=0.5)
    container = Container(("h", 1))
    assert book.answer(0, container.ask) == ("h", 1)
    container.up = False
    for _ in range(3):  # as long as it stays down
        assert book.answer(0, container.ask) == ("h", 1)
    assert container.timeouts == [None, 0.5, 0.5, 0.5]
    container.endpoint, container.up = ("h2", 2), True  # back, elsewhere
    assert book.answer(0, container.ask) == ("h2", 2)
    container.up = False
    assert book.answer(0, container.ask) == ("h2", 2)


def test_each_container_has_its_own_last_endpoint() -> None:
    book = EndpointBook()
    a, b = Container(("a", 1)), Container(("b", 2))
    assert book.answer(0, a.ask) == ("a", 1)
    b.up = False
    with pytest.raises(ContainerNotReadyError):
        book.answer(1, b.ask)  # container 0's endpoint is not container 1's
    a.up = False
    assert book.answer(0, a.ask) == ("a", 1)


def test_answers_from_many_threads_keep_one_endpoint_per_container() -> None:
    book = EndpointBook()
    containers = [Container((f"h{i}", i)) for i in range(4)]
    errors: list[BaseException] = []

    def ask_all() -> None:
        try:
            for n in range(200):
                i = n % 4
                assert book.answer(i, containers[i].ask) == (f"h{i}", i)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=ask_all) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []


def test_a_container_never_heard_of_gets_the_endpoint_the_config_fixes_after_its_timeout() -> None:
    """Found by the chaos smoke run: the endpoints actor restarted (its book empty) while a
    container was down, and getURI failed until the container came back; the official
    reader's retries of it can run out (its segment reader panics)."""
    book = EndpointBook(fixed=lambda container_id: ("127.0.0.1", 6000 + container_id))
    container = Container(("127.0.0.1", 6002))
    container.up = False
    assert book.answer(2, container.ask) == ("127.0.0.1", 6002)
    assert container.timeouts == [None]  # waited as for any container never heard of
    container.endpoint, container.up = ("127.0.0.1", 6002), True
    assert book.answer(2, container.ask) == ("127.0.0.1", 6002)


def test_a_config_fixes_an_endpoint_only_for_a_fixed_port_on_a_fixed_host() -> None:
    assert EndpointConfig().fixed_endpoint(3, 4) == ("127.0.0.1", 6003)
    assert EndpointConfig(wire_port_base=0).fixed_endpoint(3, 4) is None
    wildcard = EndpointConfig(host="0.0.0.0", insecure_ok=True)  # the node's IP: unknown
    assert wildcard.fixed_endpoint(3, 4) is None
    published = EndpointConfig(published_host="pravega.local")
    assert published.fixed_endpoint(0, 4) == ("pravega.local", 6000)
