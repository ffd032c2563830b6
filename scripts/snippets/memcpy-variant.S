// A memcpy variant: copy 256 bytes from the first half of the tagged buffer (x0) to the
// second, 32 bytes a loop with LDP/STP of x registers.
// Expect 16 checked reads and 16 checked writes (8 loops of 2 LDP + 2 STP; `:k` at EL1).
	add	x9, x0, #2048		// destination
	mov	x10, x0			// source
	mov	x11, #256		// bytes
1:	ldp	x12, x13, [x10]
	ldp	x14, x15, [x10, #16]
	stp	x12, x13, [x9]
	stp	x14, x15, [x9, #16]
	add	x10, x10, #32
	add	x9, x9, #32
	subs	x11, x11, #32
	b.ne	1b
	ret
