#!/usr/bin/python3
"""bench/report.py's choice of rounds: make bench compares implementations by their best round, and
the reference VM changes state (a cache-line exchange of ~0.07 or ~0.3 us) between sweeps; a table
whose sweeps met both states must compare rounds of one state, and say which it left out."""
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import bench  # noqa: E402
import report  # noqa: E402


def record(results, lines, rounds=3):
    return {"collective": "reduce", "ranks": 2, "rounds": rounds, "bands": [(8, 8, 4, 1000, 100)],
            "impls": list(results), "results": results, "lines": lines, "info": {}, "errors": {},
            "load_before": "-", "load_after": "-", "seconds": 1.0, "dtype_mem": "hostccl malloc"}


class KeptRounds(unittest.TestCase):
    def test_one_state_keeps_every_round(self):
        r = record({"hostccl malloc": [{8: (8, 1.0)}, {8: (8, 0.7)}], "Open MPI": [{8: (8, 0.5)}, {8: (8, 0.4)}]},
                   {"hostccl malloc": ["0.300 us", "0.290 us"], "Open MPI": ["0.310 us", "0.320 us"]}, rounds=2)
        self.assertIsNone(report.kept_rounds(r))
        self.assertEqual(report.best(r, "hostccl malloc")[8][1], 0.7)

    def test_fast_spell_of_one_implementation_is_left_out(self):
        # Open MPI's second sweep met the fast state: its 0.1 us must not face hostccl's slow sweeps.
        r = record({"hostccl malloc": [{8: (8, 0.9)}, {8: (8, 0.8)}, {8: (8, 0.85)}],
                    "Open MPI": [{8: (8, 0.45)}, {8: (8, 0.10)}, {8: (8, 0.40)}]},
                   {"hostccl malloc": ["0.300 us", "0.310 us", "0.290 us"],
                    "Open MPI": ["0.300 us", "0.080 us", "0.300 us"]})
        self.assertEqual(report.kept_rounds(r), {"hostccl malloc": [True, True, True],
                                                 "Open MPI": [True, False, True]})
        self.assertEqual(report.best(r, "Open MPI")[8][1], 0.40)
        self.assertIn("left out: Open MPI r2", report.combo_markdown(r, ENV))

    def test_majority_state_wins_and_a_tie_keeps_the_slow_one(self):
        fast = {"hostccl malloc": ["0.080 us", "0.070 us"], "Open MPI": ["0.090 us", "0.300 us"]}
        r = record({"hostccl malloc": [{8: (8, 0.3)}, {8: (8, 0.2)}], "Open MPI": [{8: (8, 0.1)}, {8: (8, 0.4)}]},
                   fast, rounds=2)
        self.assertEqual(report.kept_rounds(r)["Open MPI"], [True, False])
        tie = {"hostccl malloc": ["0.080 us", "0.300 us"], "Open MPI": ["0.090 us", "0.300 us"]}
        r["lines"] = tie
        self.assertEqual(report.kept_rounds(r), {"hostccl malloc": [False, True], "Open MPI": [False, True]})

    def test_every_round_counts_when_an_implementation_has_none_in_the_majority_state(self):
        r = record({"hostccl malloc": [{8: (8, 0.3)}, {8: (8, 0.2)}, {8: (8, 0.2)}],
                    "Open MPI": [{8: (8, 0.5)}, {8: (8, 0.6)}, {8: (8, 0.5)}]},
                   {"hostccl malloc": ["0.300 us"] * 3, "Open MPI": ["0.080 us"] * 3})
        self.assertIsNone(report.kept_rounds(r))

    def test_unmeasured_exchanges_and_old_records_change_nothing(self):
        r = record({"hostccl malloc": [{8: (8, 0.3)}]}, {"hostccl malloc": ["not measured"]}, rounds=1)
        self.assertIsNone(report.kept_rounds(r))
        del r["lines"]
        self.assertIsNone(report.kept_rounds(r))
        self.assertEqual(report.line_range(r), "—")

    def test_the_rounds_table_and_the_summary_show_the_exchanges(self):
        r = record({"hostccl malloc": [{8: (8, 0.3)}, None], "Open MPI": [{8: (8, 0.5)}, {8: (8, 0.4)}]},
                   {"hostccl malloc": ["0.300 us"], "Open MPI": ["0.080 us", "0.310 us"]}, rounds=2)
        header, rows = report.rounds_rows(r)
        self.assertEqual(rows[-1], ["line exchange before", "0.300", "—", "0.080", "0.310"])
        self.assertEqual(report.line_range(r), "0.08-0.31")


class RefillState(unittest.TestCase):
    """An implementation whose sweeps all met the state the fewer sweeps met (Open MPI fast, the
    others slow) is swept again by bench.py once a line exchange shows the majority state, so that
    the table compares one state; while the state stays away, it waits only its budget."""

    def table(self):
        return record({"hostccl malloc": [{8: (8, 0.60)}, {8: (8, 0.59)}], "Open MPI": [{8: (8, 0.25)}, {8: (8, 0.14)}],
                       "MPICH": [{8: (8, 0.40)}, {8: (8, 0.48)}]},
                      {"hostccl malloc": ["0.258 us", "0.232 us"], "Open MPI": ["0.063 us", "0.062 us"],
                       "MPICH": ["0.256 us", "0.235 us"]}, rounds=2)

    def refill(self, r, exchanges):
        seen = iter(exchanges)
        swept = []

        class Impl:
            def __init__(self, name):
                self.name = name

            def sweep(self, ctx, coll, n, bands, tag):
                swept.append((self.name, tag))
                return {8: (8, 0.31)}, "info"

        ctx = types.SimpleNamespace(state_budget=100.0)
        saved = bench.line_exchange, bench.STATE_POLL_S, bench.STATE_WAIT_S
        bench.line_exchange = lambda ctx, rounds=None: next(seen, "0.070 us")
        bench.STATE_POLL_S, bench.STATE_WAIT_S = 0.001, 0.2
        try:
            bench.refill_state(ctx, [Impl(n) for n in r["impls"]], r, r["bands"])
        finally:
            bench.line_exchange, bench.STATE_POLL_S, bench.STATE_WAIT_S = saved
        return swept, ctx

    def test_the_implementation_missing_the_majority_state_is_named(self):
        r = self.table()
        self.assertIsNone(report.kept_rounds(r))
        self.assertEqual(report.missing_state(r)[1:], (False, ["Open MPI"]))

    def test_it_is_swept_again_once_that_state_is_back(self):
        r = self.table()
        swept, ctx = self.refill(r, ["0.070 us", "0.065 us", "0.240 us"])
        self.assertEqual(swept, [("Open MPI", "reduce-2-open_mpi-r3")])
        self.assertIsNone(report.missing_state(r))
        self.assertEqual(report.kept_rounds(r)["Open MPI"], [False, False, True])
        self.assertEqual(report.best(r, "Open MPI")[8][1], 0.31)
        header, rows = report.rounds_rows(r)
        self.assertIn("Open MPI r3", header)
        self.assertEqual(rows[-1], ["line exchange before", "0.258", "0.232", "0.063", "0.062", "0.240", "0.256",
                                    "0.235"])
        self.assertIn("Swept again once that state was back, for implementations that had not met it: Open MPI r3",
                      report.combo_markdown(r, ENV))
        self.assertLess(ctx.state_budget, 100.0)

    def test_it_waits_no_longer_than_its_budget(self):
        r = self.table()
        swept, _ = self.refill(r, [])  # the fast state stays
        self.assertEqual(swept, [])
        self.assertIsNone(report.kept_rounds(r))


class ErraticPeer(unittest.TestCase):
    """A busy-polling MPI's rounds when ranks outnumber cores: one lucky sweep, one stalled. The
    ratios keep using its best round; the reports name the sizes where that best was a lottery win."""

    def test_a_size_whose_faster_mpi_spread_tenfold_is_named(self):
        r = record({"hostccl malloc": [{8: (8, 1.9), 1024: (1024, 3.0)}, {8: (8, 2.2), 1024: (1024, 3.1)}],
                    "Open MPI": [{8: (8, 6.3), 1024: (1024, 12.0)}, {8: (8, 6.2), 1024: (1024, 13.0)}],
                    "MPICH": [{8: (8, 48.5), 1024: (1024, 2.2)}, {8: (8, 0.73), 1024: (1024, 2.3)}]},
                   {}, rounds=2)
        self.assertEqual(report.erratic_sizes(r, report.MPIS, "hostccl malloc"), [8])
        self.assertAlmostEqual(report.best(r, "MPICH")[8][1], 0.73)  # the ratio still uses it
        self.assertIn("Against an erratic MPI (`hostccl malloc`): 8:", report.combo_markdown(r, ENV))
        table = [line.split("|")[1:-1] for line in report.summary_markdown([r], dict(ENV, load_end="-")).splitlines()
                 if line.startswith("|")]
        column = [c.strip() for c in table[0]].index("erratic MPI at")
        self.assertEqual(table[2][column].strip(), "8")

    def test_a_slower_mpi_spreading_does_not_count(self):
        # Open MPI is erratic at 8 B but MPICH is the faster one there, and steady.
        r = record({"hostccl malloc": [{8: (8, 1.0)}, {8: (8, 1.0)}],
                    "Open MPI": [{8: (8, 50.0)}, {8: (8, 4.0)}], "MPICH": [{8: (8, 0.9)}, {8: (8, 1.1)}]},
                   {}, rounds=2)
        self.assertEqual(report.erratic_sizes(r, report.MPIS, "hostccl malloc"), [])
        self.assertNotIn("erratic MPI (", report.combo_markdown(r, ENV))

    def test_one_round_is_never_erratic(self):
        r = record({"hostccl malloc": [{8: (8, 1.0)}], "MPICH": [{8: (8, 0.5)}]}, {}, rounds=1)
        self.assertEqual(report.erratic_sizes(r, report.MPIS, "hostccl malloc"), [])


ENV = {"date": "d", "host": "h", "cores": 2, "cpu": "c", "hostccl": "v", "rounds": 3, "command": "c",
       "load_start": "-", "skipped": []}

if __name__ == "__main__":
    unittest.main()
