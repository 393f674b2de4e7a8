/* See c_callers.c: out-of-range enum values, made in C. */
#ifndef VYRE_TESTS_UNIT_C_CALLERS_H_
#define VYRE_TESTS_UNIT_C_CALLERS_H_

#include "vyre_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

vyre_status c_set_log_callback_with_level(int level);
const char* c_status_name(int value);
void c_set_code_kind(vyre_program_desc* desc, int kind);
void c_set_binding_role(vyre_binding_decl* decl, int role);
void c_set_binding_source(vyre_dispatch_binding* binding, int source);
void c_set_param_kind(vyre_kernel_param* param, int kind);

#ifdef __cplusplus
}
#endif

#endif /* VYRE_TESTS_UNIT_C_CALLERS_H_ */
