"""Classic BPF, the subset seccomp filters use: encoding, and an evaluator for tests.

The evaluator runs a program against one ``struct seccomp_data`` the way the
kernel does (``kernel/seccomp.c``, ``net/core/filter.c``), so the filter's
logic can be checked syscall by syscall without a kernel. It proves the rules;
tests/boundary proves the kernel applies them.
"""

from __future__ import annotations

import struct

from sandbx._value import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

# include/uapi/linux/bpf_common.h and filter.h
LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
ALU_AND_K = 0x04 | 0x50 | 0x00  # BPF_ALU | BPF_AND | BPF_K
JMP_JA = 0x05 | 0x00  # BPF_JMP | BPF_JA
JMP_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
JMP_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
JMP_JSET_K = 0x05 | 0x40 | 0x00  # BPF_JMP | BPF_JSET | BPF_K
RET_K = 0x06 | 0x00  # BPF_RET | BPF_K

# include/uapi/linux/seccomp.h: offsets into struct seccomp_data.
OFFSET_NR = 0
OFFSET_ARCH = 4


def offset_of_arg_low_word(index: int) -> int:
    # args[] are u64 after nr, arch and instruction_pointer; on a little-endian
    # machine the low 32 bits come first.
    return 16 + 8 * index


MAX_JUMP = 255
MAX_INSTRUCTIONS = 4096  # BPF_MAXINSNS


@value(kw_only=False)
class Instruction:
    code: int
    jump_true: int
    jump_false: int
    k: int

    def encode(self) -> bytes:
        return struct.pack("=HBBI", self.code, self.jump_true, self.jump_false, self.k)


def load(offset: int) -> Instruction:
    return Instruction(LD_W_ABS, 0, 0, offset)


def and_mask(mask: int) -> Instruction:
    return Instruction(ALU_AND_K, 0, 0, mask)


def jump_if_equal(value: int, *, if_true: int = 0, if_false: int = 0) -> Instruction:
    return Instruction(JMP_JEQ_K, if_true, if_false, value)


def jump_if_at_least(value: int, *, if_true: int = 0, if_false: int = 0) -> Instruction:
    return Instruction(JMP_JGE_K, if_true, if_false, value)


def jump_if_any_bit(mask: int, *, if_true: int = 0, if_false: int = 0) -> Instruction:
    return Instruction(JMP_JSET_K, if_true, if_false, mask)


def give(action: int) -> Instruction:
    return Instruction(RET_K, 0, 0, action)


def encode(program: list[Instruction]) -> bytes:
    if not 0 < len(program) <= MAX_INSTRUCTIONS:
        msg = f"a seccomp program holds 1 to {MAX_INSTRUCTIONS} instructions, not {len(program)}"
        raise ValueError(msg)
    for instruction in program:
        if instruction.jump_true > MAX_JUMP or instruction.jump_false > MAX_JUMP:
            msg = f"jump too far in {instruction}"
            raise ValueError(msg)
    return b"".join(instruction.encode() for instruction in program)


@value
class SeccompData:
    """One syscall as a filter sees it."""

    nr: int
    arch: int
    args: tuple[int, ...] = (0, 0, 0, 0, 0, 0)

    def word_at(self, offset: int) -> int:
        packed = struct.pack(
            "<iIQ6Q", self.nr, self.arch, 0, *(self.args + (0,) * (6 - len(self.args)))
        )
        (word,) = struct.unpack_from("<I", packed, offset)
        return int(word)


_CONDITIONS: dict[int, Callable[[int, int], bool]] = {
    JMP_JEQ_K: lambda accumulator, k: accumulator == k,
    JMP_JGE_K: lambda accumulator, k: accumulator >= k,
    JMP_JSET_K: lambda accumulator, k: bool(accumulator & k),
}


def evaluate(program: list[Instruction], data: SeccompData) -> int:
    """The action the kernel would take: the value of the RET the program reaches."""
    accumulator = 0
    index = 0
    while index < len(program):
        instruction = program[index]
        index += 1
        code = instruction.code
        if code == LD_W_ABS:
            accumulator = data.word_at(instruction.k)
        elif code == ALU_AND_K:
            accumulator &= instruction.k
        elif code == JMP_JA:
            index += instruction.k
        elif code == RET_K:
            return instruction.k
        elif code in _CONDITIONS:
            matched = _CONDITIONS[code](accumulator, instruction.k)
            index += instruction.jump_true if matched else instruction.jump_false
        else:
            msg = f"instruction {code:#x} is outside the evaluated subset"
            raise ValueError(msg)
    msg = "the program ran off its end without a RET"
    raise ValueError(msg)
