"""Suite-wide process set-up (pytest loads this file in the main process and in every xdist worker)."""
import signal

# A suite started as a background job (`make test &`, nohup, a CI runner without job control) inherits
# SIGINT ignored, and a Python process that starts with SIGINT ignored installs no KeyboardInterrupt
# handler, nor do the children the tests start (the disposition is inherited through exec): the tests
# that interrupt a child (test_reliability_s31, test_intr32_s32, test_concurrency) then waited on it
# forever. A handler (not SIG_IGN) here becomes SIG_DFL in every child, as at a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
