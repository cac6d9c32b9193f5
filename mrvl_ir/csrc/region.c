/*
 * One MLIP region as a TVM-FFI function: the model binary plus a call into mrvl's runtime.
 *
 * mrvl/byoc.py compiles this file once per region, with
 *   -DMRVL_ENTRY=__tvm_ffi_<symbol>    the safe-call symbol TVM looks up for the region
 *   -DMRVL_BLOB_FILE="<path>"          the model binary to embed
 * and hands the object to tvm.runtime.load_static_library, so it is linked into the library
 * that export_library writes and travels with it.
 *
 * At run time the function forwards (blob pointer, blob length, its own arguments) to the
 * global function "mrvl.runtime.run_region", which `import mrvl` registers. The arguments are
 * the region's DLTensors, inputs first and outputs last (destination-passing style).
 */
#include <stdint.h>
#include <tvm/ffi/c_api.h>

#if !defined(MRVL_ENTRY) || !defined(MRVL_BLOB_FILE)
#error "compile with -DMRVL_ENTRY=<symbol> -DMRVL_BLOB_FILE=\"<path>\""
#endif

/* The assembler embeds the binary: no C initializer to parse, so a 30 MB model compiles as
   fast as a small one. The labels are local to this object, so regions cannot clash. */
__asm__(
    "  .pushsection .rodata.mrvl_blob,\"a\"\n"
    "  .balign 64\n"
    "mrvl_blob_begin:\n"
    "  .incbin \"" MRVL_BLOB_FILE "\"\n"
    "mrvl_blob_end:\n"
    "  .popsection\n");
extern const unsigned char mrvl_blob_begin[] __attribute__((visibility("hidden")));
extern const unsigned char mrvl_blob_end[] __attribute__((visibility("hidden")));

static const char kRunRegion[] = "mrvl.runtime.run_region";

/* The runtime function, looked up on first call: it exists only once `import mrvl` ran. */
static TVMFFIObjectHandle run_region_handle(void) {
  static TVMFFIObjectHandle cached = NULL;
  TVMFFIObjectHandle fn = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);
  if (fn != NULL) return fn;
  TVMFFIByteArray name = {kRunRegion, sizeof(kRunRegion) - 1};
  if (TVMFFIFunctionGetGlobal(&name, &fn) != 0) return NULL;
  if (fn == NULL) {
    TVMFFIErrorSetRaisedFromCStr(
        "RuntimeError",
        "mrvl region: global function 'mrvl.runtime.run_region' is not registered; "
        "`import mrvl` before running a module built by mrvl");
    return NULL;
  }
  TVMFFIObjectHandle expected = NULL;
  if (!__atomic_compare_exchange_n(&cached, &expected, fn, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    TVMFFIObjectDecRef(fn); /* another thread won the race; keep its handle */
    fn = expected;
  }
  return fn;
}

TVM_FFI_DLL_EXPORT int MRVL_ENTRY(void* self, const TVMFFIAny* args, int32_t num_args,
                                  TVMFFIAny* result) {
  (void)self;
  (void)result; /* the region writes its outputs in place and returns nothing */
  TVMFFIObjectHandle fn = run_region_handle();
  if (fn == NULL) return -1;

  TVMFFIAny call_args[num_args + 2];
  call_args[0] = (TVMFFIAny){.type_index = kTVMFFIOpaquePtr, .v_ptr = (void*)mrvl_blob_begin};
  call_args[1] = (TVMFFIAny){.type_index = kTVMFFIInt,
                             .v_int64 = (int64_t)(mrvl_blob_end - mrvl_blob_begin)};
  for (int32_t i = 0; i < num_args; ++i) call_args[i + 2] = args[i];

  TVMFFIAny ret = {.type_index = kTVMFFINone};
  int rc = TVMFFIFunctionCall(fn, call_args, num_args + 2, &ret);
  if (rc == 0 && ret.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(ret.v_obj);
  return rc;
}
