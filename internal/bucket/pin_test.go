package bucket

const pinnedHash uint64 = 0xe65880427c7d4559
