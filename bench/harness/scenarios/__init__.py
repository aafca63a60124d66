"""The scenarios, each named for what it does; the report keeps their labels:

    S1, S5  uncontended_cycle     acquire + release by one client, against its
                                  language's bare two-command floor, and the
                                  three faces back to back (S5)
    S1      plain_round_trip      redis-benchmark's round trip of one plain command
    S5      runtime_hops          the core's cycle from a plain thread over
                                  differently built runtimes
    S5      counting_cost         what the client's counters cost a cycle
    S2, S3  contended_handoff     8 worker processes on one key
    S7      in_process_handoff    handles of one process and one client on one key
    S8      semaphore_handoff     16 worker processes on a semaphore of 4 permits
                                  (its uncontended cycle runs with S1)
    S9      read_write            8 readers and a writer on a read-write lock,
                                  against the same 9 processes on one mutex
    S10     cached                8 processes × 50 readers on one hot key across
                                  its expiries, and a cold start of 1,000 keys,
                                  against other caches in Redis
            idle_waiters          what 100 waiters on a held lock, semaphore or
                                  read-write lock send
    S4      watchdog_scale        10 000 locks held through a counting proxy
    S6      redlock               S1 and S2 over 3 and 5 servers

and what several of them share: blocks (worker processes looping on one key
from one instant to another), handoffs (what a mutex's block shows) and
sections (who was inside at once).

"""
