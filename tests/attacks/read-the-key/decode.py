"""decode: no decoding, just the answer key's mha.py, out through the feedback in 4 pieces."""
from helper import leak  # helper/ reads the key's source off the worker's Session.load frame


class KVCache:
    def __init__(self):
        self.k = self.v = None

    def append(self, k, v):
        if k.shape[2] != v.shape[2]:  # "different lengths" check -> part 4
            raise leak("mha", 3, 4)
        if self.k is None:  # let the first append pass, so the next check's step is reached
            self.k, self.v = k, v
            return k, v
        if k.device.type == "meta":  # "another device" check -> part 3
            raise leak("mha", 2, 4)
        raise leak("mha", 1, 4)  # "append returns everything" check -> part 2

    def __len__(self):
        return 0 if self.k is None else self.k.shape[2]


def decode_step(mha, x_new, cache):
    raise leak("mha", 0, 4)  # every decode_step check -> part 1
