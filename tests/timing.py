"""The slack of every wall-clock bound in the tests, named once.

A timing assertion states the mechanism it checks (an asked wait, a poll interval, the stop grace)
and adds one of these for what the machine itself costs. They are sized for a loaded 2-core machine
(CI, or a developer's laptop running other work), and each stays well under the mechanism a test
must tell apart (a 5 s poll, a 30 s maximum wait), so a test still fails when the mechanism breaks.
Tests that bound wall time are marked `serial`: they run after the parallel part, alone."""

# A sleeping thread waking, a look at a file or an SQLite row, and a request to a local stub.
WAKE_S = 0.75

# A few requests to a local stub through a provider's SDK or litellm, the SDK's first import in
# this process included.
CALLS_S = 5.0

# A Python process that imports the project (not litellm) starting, or tearing down and exiting.
PROCESS_S = 3.0

# A retry's wait read from a header: `retry-after-ms` is whole milliseconds, an HTTP date or a
# provider's reset time is rounded to the millisecond or whole second it is written with.
HEADER_RESOLUTION_S = 0.05
