from distscope.sim.loop import EventLoop


def test_order_is_time_priority_then_fifo() -> None:
    loop = EventLoop()
    seen: list[str] = []
    loop.at(2.0, lambda: seen.append("late"))
    loop.at(1.0, lambda: seen.append("b"), priority=1)
    loop.at(1.0, lambda: seen.append("a1"))
    loop.at(1.0, lambda: seen.append("a2"))
    loop.at(0.5, lambda: loop.after(0.5, lambda: seen.append("chained")))
    assert loop.run() == 2.0
    assert seen == ["a1", "a2", "chained", "b", "late"]
    assert loop.events == 6


def test_counter_is_per_loop() -> None:
    a, b = EventLoop(), EventLoop()
    a.at(0.0, lambda: None)
    b.at(0.0, lambda: None)
    assert a._seq == b._seq == 1


def test_rejects_past() -> None:
    loop = EventLoop()
    loop.at(1.0, lambda: loop.at(0.5, lambda: None))
    try:
        loop.run()
    except ValueError as exc:
        assert "before now" in str(exc)
    else:
        raise AssertionError("scheduling in the past must fail")
