// The fiber switch on x86-64 (System V): callee-saved registers pushed on the old stack, popped
// from the new one. Boost.Context's jump_fcontext also saves and reloads MXCSR and the x87 control
// word (ldmxcsr and fldcw stall) and is reached through the PLT; kernels never change the FP
// environment, so this switch leaves it alone and a barrier costs about a third less.
//
//   transfer ember_emu_jump(void* to, void* data)  -> {the context switched away from, data}
//
// A context is the stack pointer of a suspended fiber: its six registers, then where it resumes.
#if defined(__x86_64__)
        .text
        .globl  ember_emu_jump
        .type   ember_emu_jump, @function
        .p2align 4
ember_emu_jump:
        pushq   %rbp
        pushq   %rbx
        pushq   %r15
        pushq   %r14
        pushq   %r13
        pushq   %r12
        movq    %rsp, %rax          // the context left behind, returned in rax
        movq    %rdi, %rsp
        popq    %r12
        popq    %r13
        popq    %r14
        popq    %r15
        popq    %rbx
        popq    %rbp
        movq    %rsi, %rdx          // data, returned in rdx
        movq    %rax, %rdi          // a new fiber's entry takes {rdi, rsi} = {from, data}
        ret
        .size   ember_emu_jump, .-ember_emu_jump

// A new fiber's first resumption lands here with the entry function in r12 and a 16-byte aligned
// stack; the entry never returns (it leaves with a last switch).
        .globl  ember_emu_fiber_start
        .type   ember_emu_fiber_start, @function
        .p2align 4
ember_emu_fiber_start:
        callq   *%r12
        ud2
        .size   ember_emu_fiber_start, .-ember_emu_fiber_start
#endif
        .section .note.GNU-stack,"",@progbits
