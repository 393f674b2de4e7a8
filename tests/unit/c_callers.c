/* Calls made from C, where any int converts to an enum type: a C caller may
 * pass values outside an enum's constants (including negative ones) and the
 * library must answer INVALID_ARGUMENT, not misbehave. (Making such values in
 * C++ would be undefined behaviour in the test itself.) */
#include "c_callers.h"

static void ignore_log(void* user_data, vyre_log_level level, const char* message) {
  (void)user_data;
  (void)level;
  (void)message;
}

vyre_status c_set_log_callback_with_level(int level) {
  return vyre_set_log_callback(ignore_log, NULL, (vyre_log_level)level);
}

const char* c_status_name(int value) { return vyre_status_name((vyre_status)value); }

void c_set_code_kind(vyre_program_desc* desc, int kind) { desc->code_kind = (vyre_code_kind)kind; }

void c_set_binding_role(vyre_binding_decl* decl, int role) {
  decl->role = (vyre_binding_role)role;
}

void c_set_binding_source(vyre_dispatch_binding* binding, int source) {
  binding->source = (vyre_binding_source)source;
}

void c_set_param_kind(vyre_kernel_param* param, int kind) { param->kind = (vyre_param_kind)kind; }
