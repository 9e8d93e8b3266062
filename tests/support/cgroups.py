"""Fake cgroup trees for the readers of CPU quotas and memory limits, and a BLAS library with a
thread cap."""


def cgroup_tree(tmp_path, lines, files):
    """A fake /proc/self/cgroup of `lines` and a cgroup mount holding `files` {path: text}."""
    proc, mount = tmp_path / "cgroup", tmp_path / "mount"
    proc.write_text("".join(f"{line}\n" for line in lines))
    for path, text in files.items():
        (mount / path).parent.mkdir(parents=True, exist_ok=True)
        (mount / path).write_text(text)
    return str(proc), str(mount)


class CappedBlas:
    """A BLAS library (threadpoolctl's controller) that runs at most `most` threads, as OpenBLAS
    runs at most the count it was built for (64 in NumPy's wheels) whatever it is asked."""

    def __init__(self, most, n=1):
        self.most, self.n = most, n

    def get_num_threads(self):
        return self.n

    def set_num_threads(self, n):
        self.n = min(n, self.most)
