# Writes the NumPy-made fixtures host's tests read (npy_numpy_test.go):
#   /usr/bin/python3 make.py     (NumPy 1.24 made the committed ones)
# Each array's values are arange-based, so the tests know them without
# NumPy.
import numpy as np

f64 = np.arange(6, dtype='<f8').reshape(2, 3)
np.save('fortran_f64_2x3.npy', np.asfortranarray(f64))
i32 = np.arange(24, dtype='<i4').reshape(2, 3, 4) - 12
np.save('fortran_i32_2x3x4.npy', np.asfortranarray(i32))

# bf16 bits of 1, -3, 0.5 as raw 16-bit data: uint16, and the two-byte
# void NumPy writes for ml_dtypes.bfloat16 (ml_dtypes says '<V2').
bits = np.array([0x3f80, 0xc040, 0x3f00], dtype='<u2')
np.save('bf16_bits_u2.npy', bits)
np.save('bf16_bits_v2.npy', bits.view('V2'))

x = np.arange(6, dtype='<f4').reshape(2, 3) / 4
n = np.array([1, -2, 3], dtype='<i8')
b = np.array([True, False, True])
np.savez('savez.npz', x=x, n=n, b=b, f=np.asfortranarray(f64))
np.savez_compressed('savez_compressed.npz', x=x, n=n, b=b, f=np.asfortranarray(f64))
