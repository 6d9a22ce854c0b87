"""The mixed burst of issue 59 on the real admission, with model calls that sleep.

    python -m bench.admission_sim [--scale 0.5] [--per-kind 16] [--clients 32] [--seed 0]

``bench.load --scenario mixed`` through HTTP takes minutes and depends on how busy the machine
is; this drives the same burst straight into an :class:`app.engine.Engine` whose "model calls"
sleep for the seconds the four heavy kinds took on this machine (2026-12-06, load average ~10:
beam-8 trace 1.3 s, 128-step KV-cache race 6 s, interpret 0.6 + 8 s, x-ray 0.5 + 0.5 s; each
drawn ×0.8–1.25, all ×``--scale``, the 20 s time limit too). A sleep takes as long on a busy
machine as on an idle one, so the figures say what the admission policy does, not what the
machine did. Each client sends its next request when one is answered; a refused one waits its
Retry-After and sends it once more. Printed: the first tries served per kind, the retries
admitted, how long the burst took against the model seconds it asked (the rest: the thread idle).
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections import Counter

from app.engine import CURRENT_TICKET, REQUEST_OVER, Busy, Cancelled, Engine, Ticket
from model.translator import DEFAULT_CHECKPOINT, Translator

SECONDS = {"beam": 1.3, "race": 6.0, "trace": 0.6, "attributions": 8.0, "xray": 0.5,
           "record": 0.5}
ROUTES = {"/api/trace": ["beam"], "/api/kv-cache": ["race"],
          "/api/figures/interpret": ["trace", "attributions"], "/api/xray/view": ["xray", "record"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.5, help="every time ×this")
    parser.add_argument("--per-kind", type=int, default=16)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-retry", action="store_true",
                        help="a refused client goes on to its next request instead of retrying")
    parser.add_argument("--limit", type=float, default=None,
                        help="the time limit in seconds (default 20 × --scale: the same share of "
                             "the limit per call as on the machine measured; 20 with a smaller "
                             "--scale is a faster machine)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    calls = {}
    for name, seconds in SECONDS.items():
        def call(text: str, seconds: float = seconds) -> None:
            time.sleep(seconds * args.scale * rng.uniform(0.8, 1.25))
        call.__qualname__ = name  # the cost model tells kinds apart by name
        calls[name] = call
    engine = Engine(Translator.load(DEFAULT_CHECKPOINT))
    limit = args.limit if args.limit is not None else 20 * args.scale

    def serve(route: str, text: str) -> dict:
        ticket = Ticket(limit, route=route)
        token = CURRENT_TICKET.set(ticket)
        outcome = {"route": route}
        try:
            for name in ROUTES[route]:
                engine.run(calls[name], text)
            outcome["status"] = "served"
        except Busy as busy:
            outcome.update(status="shed", retry_after=busy.retry_after)
        except Cancelled:
            outcome["status"] = "deadline"
        finally:
            ticket.cancel(REQUEST_OVER)
            CURRENT_TICKET.reset(token)
        return outcome

    for route in ROUTES:  # each kind measured once, as after its first call on a server
        serve(route, "text 999")
    items = iter([(list(ROUTES)[i % 4], f"text {i:03d}") for i in range(4 * args.per_kind)])
    first: list[dict] = []
    again: list[dict] = []
    lock = threading.Lock()
    gate = threading.Barrier(args.clients)

    def client() -> None:
        gate.wait()
        while True:
            with lock:
                item = next(items, None)
            if item is None:
                return
            outcome = serve(*item)
            with lock:
                first.append(outcome)
            if outcome["status"] == "shed" and not args.no_retry:
                time.sleep(outcome["retry_after"])
                retry = serve(*item)
                with lock:
                    again.append(retry)

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    asked = args.per_kind * sum(SECONDS.values()) * args.scale
    served = Counter(o["route"] for o in first if o["status"] == "served")
    print(f"first tries served per kind (of {args.per_kind}): "
          + ", ".join(f"{route} {served[route]}" for route in ROUTES))
    in_all = Counter(o["route"] for o in first + again if o["status"] == "served")
    print(f"served in all, first try or retry (of {args.per_kind}): "
          + ", ".join(f"{route} {in_all[route]}" for route in ROUTES)
          + f"; stopped at the deadline: {sum(o['status'] == 'deadline' for o in first + again)}")
    print(f"retries after Retry-After admitted: {sum(o['status'] == 'served' for o in again)} of "
          f"{len(again)} ({dict(Counter(o['status'] for o in again))})")
    print(f"the burst took {took:.0f} s for ~{asked:.0f} s of model time asked; longest "
          f"Retry-After {max((o.get('retry_after') or 0) for o in first)} s")


if __name__ == "__main__":
    main()
