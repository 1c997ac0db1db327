"""The resource limiter: control region layout, Python mirror, native interception library."""
