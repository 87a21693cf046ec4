"""A launch that dies because the rendezvous port is taken ("Address already in use") is named as
such, from the error line or from how people word it, and does not pull other failures towards it.
The queries are written for this test in the words such reports use."""
import pytest
from asking import causes

ERROR = ("RuntimeError: The server socket has failed to listen on any local network address. "
         "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).")


@pytest.mark.parametrize("query", [
    f"started a second torchrun job on the same server with 4 other GPUs:\n{ERROR}",
    "多卡训练报错 Address already in use，另一个训练任务还在跑",
    "deepspeed launch fails right away: torch.distributed.DistNetworkError: name: EADDRINUSE, message: address already in use",
])
def test_the_taken_port_ranks_first(query):
    found = causes(query)
    assert found[0]["id"] == "system-failure.port-in-use", [c["id"] for c in found[:5]]


def test_the_error_line_confirms_it():
    found = {c["id"]: c for c in causes(ERROR)}
    assert found["system-failure.port-in-use"]["status"] == "confirmed"


def test_a_watchdog_timeout_mid_training_is_not_a_port_clash():
    query = ("8 GPUs, trained for 3 hours, then Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800013 milliseconds before timing out")
    top = [c["id"] for c in causes(query)[:3]]
    assert "system-failure.port-in-use" not in top, top
