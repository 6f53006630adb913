"""An engine used from asyncio: its blocking calls sent to threads with
``asyncio.to_thread`` or ``loop.run_in_executor``, many tasks at once, and
tasks cancelled while their call runs in a thread."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from timebloom import ClosedError, Engine, IncompleteError


def keys_of(task: int, n: int, shared: int) -> list[str]:
    """``n`` keys of task ``task``: the first ``shared`` the same for every
    task, the rest its own."""
    return [f"shared/{i}" for i in range(shared)] + [f"task/{task}/{i}" for i in range(n - shared)]


def test_many_tasks_in_threads_each_key_new_once_and_every_acknowledged_key_kept(tb_dir):
    tasks, n, shared = 64, 2_000, 500

    async def main(e):
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(8) as pool:
            calls = [
                asyncio.to_thread(e.insert_many, keys_of(t, n, shared))
                if t % 2
                else loop.run_in_executor(pool, e.insert_many, keys_of(t, n, shared))
                for t in range(tasks)
            ]
            return await asyncio.gather(*calls)

    with Engine.create(tb_dir, tiers="7d", items_per_day=200_000) as e:
        answers = asyncio.run(asyncio.wait_for(main(e), 120))
    # Of the tasks inserting the same new key, exactly one was told it was new.
    for i in range(shared):
        assert sum(a[i] for a in answers) == 1
    assert all(all(a[shared:]) for a in answers)
    with Engine.open(tb_dir, read_only=True) as e:
        for t in range(tasks):
            assert all(e.contains_many(keys_of(t, n, shared)))


def test_a_task_cancelled_while_its_batch_runs_leaves_the_engine_usable(tb_dir):
    # Cancelling the task cannot stop the thread: the batch runs to its end
    # (every key recorded, its answers dropped with the task), the engine
    # answers the other tasks meanwhile and after, and closes.
    started = threading.Event()
    n = 200_000

    def keys():
        started.set()
        return (f"cancelled/{i}" for i in range(n))

    async def main(e):
        big = asyncio.ensure_future(asyncio.to_thread(lambda: e.insert_many(keys())))
        while not started.is_set():
            await asyncio.sleep(0.001)
        big.cancel()
        with pytest.raises(asyncio.CancelledError):
            await big
        # Others go on at once, in threads and in the loop's own thread.
        assert await asyncio.to_thread(e.insert_many, ["after/1", "after/2"]) == [True, True]
        assert e.insert("after/3") is True

    with Engine.create(tb_dir, tiers="7d", items_per_day=n) as e:
        # asyncio.run waits for the default executor's threads at its end.
        asyncio.run(asyncio.wait_for(main(e), 120))
        assert e.contains_many([f"cancelled/{i}" for i in range(n)]) == [True] * n
        assert e.insert("after/1") is False
    with Engine.open(tb_dir, read_only=True) as e:
        assert all(e.contains_many([f"cancelled/{i}" for i in range(n)] + ["after/1", "after/2", "after/3"]))


def test_closing_from_the_loop_while_a_cancelled_batch_still_runs(tb_dir):
    # close() from the event loop's thread while a cancelled task's batch
    # is in a worker thread: it waits for the chunk in flight (no
    # deadlock: the worker needs no event loop), and the batch either
    # ends whole or stops at a chunk boundary with IncompleteError; every
    # key it answered is kept.
    started = threading.Event()
    n = 300_000
    outcome = {}

    def batch(e):
        started.set()
        try:
            outcome["answers"] = e.insert_many([f"k/{i}" for i in range(n)])
        except IncompleteError as err:
            outcome["answers"] = err.answers
            outcome["cause"] = err.__cause__
        except ClosedError:
            outcome["answers"] = []

    async def main(e):
        task = asyncio.ensure_future(asyncio.to_thread(batch, e))
        while not started.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        e.close()
        assert e.closed
        with pytest.raises(ClosedError):
            e.insert("x")

    e = Engine.create(tb_dir, tiers="7d", items_per_day=n)
    asyncio.run(asyncio.wait_for(main(e), 120))
    answers = outcome["answers"]
    assert len(answers) % 16_384 == 0 or len(answers) == n
    assert all(answers)
    if "cause" in outcome:
        assert isinstance(outcome["cause"], ClosedError)
    with Engine.open(tb_dir, read_only=True) as e:
        assert all(e.contains_many([f"k/{i}" for i in range(len(answers))]))
