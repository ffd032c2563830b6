// Eight loads through the tagged buffer (x0: allocation tag 3, pointer tag 3).
// At EL1: 8 checked reads under :k in every view but "if the kernel left TCO set".
// With --el 0, x0 is the user buffer: 8 checked reads under :u.
	ldr	x9, [x0]
	ldr	x9, [x0, #16]
	ldr	x9, [x0, #32]
	ldr	x9, [x0, #48]
	ldp	x9, x10, [x0, #64]	// a pair is one read
	ldrb	w9, [x0, #80]
	ldrh	w9, [x0, #96]
	ldr	w9, [x0, #112]
	ret
