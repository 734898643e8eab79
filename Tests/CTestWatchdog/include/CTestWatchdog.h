#ifndef C_TEST_WATCHDOG_H
#define C_TEST_WATCHDOG_H

/// Seconds the test process may run before the watchdog ends it (0: no watchdog). Armed
/// when the process loads, from AGENT_TEST_RUN_LIMIT_SECONDS.
long agent_test_watchdog_limit(void);

#endif
