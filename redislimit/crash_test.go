package redislimit

func runChild(role string) int { return 2 }
