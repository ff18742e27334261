package bucket

const pinnedHash uint64 = 0x8cfacc0c1c1e299c
