"""The probe's own HTTP client: sans-I/O HTTP/1.1 and HTTP/2 (`http1`, `http2`), one asyncio
protocol per connection (`connection`), and the errors a request can end with (`errors`)."""
