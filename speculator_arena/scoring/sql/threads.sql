-- The connection's threads (the busy-window scan runs as many).
SELECT current_setting('threads')
