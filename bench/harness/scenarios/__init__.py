"""The scenarios, each named for what it does; the report keeps their labels:

    S1, S5  uncontended_cycle     acquire + release by one client, against its
                                  language's bare two-command floor, and the
                                  three faces back to back (S5)
    S1      plain_round_trip      redis-benchmark's round trip of one plain command
    S5      runtime_hops          the core's cycle from a plain thread over
                                  differently built runtimes
    S2, S3  contended_handoff     8 worker processes on one key
    S7      in_process_handoff    handles of one process and one client on one key
            idle_waiters          what 100 waiters on a held lock send
    S4      watchdog_scale        10 000 locks held through a counting proxy
    S6      redlock               S1 and S2 over 3 and 5 servers

"""
